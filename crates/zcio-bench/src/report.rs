//! Shared pieces of benchmark output: the machine description and the SVG
//! line-panel helpers.

use plotters::prelude::*;

/// A one-line description of this machine.
pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let kernel = rustix::system::uname()
        .release()
        .to_string_lossy()
        .into_owned();
    let cpus = crate::affinity::allowed_cpus();
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines().next().map(|l| {
                l.split_whitespace()
                    .nth(1)
                    .unwrap_or("0")
                    .parse::<u64>()
                    .unwrap_or(0)
            })
        })
        .unwrap_or(0);
    format!(
        "{cpu}, {} CPUs, {:.0} GiB RAM, Linux {kernel}",
        cpus.len(),
        mem as f64 / (1024.0 * 1024.0)
    )
}

/// One line of a chart: a name and its points in chart coordinates (apply
/// any log scale before, and undo it in the axis label formatters).
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend entry.
    pub name: String,
    /// Points (x, y).
    pub points: Vec<(f64, f64)>,
}

/// Axes of a [`line_panel`].
pub struct Axes<'a> {
    /// X axis description.
    pub x_desc: &'a str,
    /// Y axis description.
    pub y_desc: &'a str,
    /// X tick labels from chart coordinates.
    pub x_fmt: &'a dyn Fn(&f64) -> String,
    /// Y tick labels from chart coordinates.
    pub y_fmt: &'a dyn Fn(&f64) -> String,
    /// Fixed y range (e.g. shared by several panels); default: the data's,
    /// rounded out to whole units.
    pub y_range: Option<(f64, f64)>,
    /// Where the legend goes.
    pub legend: SeriesLabelPosition,
    /// How many x tick labels to aim for.
    pub x_labels: usize,
}

/// A tick label for a log2 axis: `f` of 2^x at whole exponents, else
/// nothing (keeps log axes free of fractional ticks).
pub fn log2_tick(x: f64, f: impl Fn(f64) -> String) -> String {
    if (x - x.round()).abs() < 1e-6 {
        f(2f64.powf(x.round()))
    } else {
        String::new()
    }
}

/// Three significant digits: `31.6`, `0.123`, `1234`.
pub fn sig3(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let digits = (2 - v.abs().log10().floor() as i32).max(0) as usize;
    format!("{v:.digits$}")
}

/// The (min, max) of `f` over all points of `series`.
pub fn extent(series: &[Series], f: impl Fn(&(f64, f64)) -> f64) -> Option<(f64, f64)> {
    series
        .iter()
        .flat_map(|s| s.points.iter())
        .map(f)
        .fold(None, |acc, v| match acc {
            None => Some((v, v)),
            Some((a, b)) => Some((f64::min(a, v), f64::max(b, v))),
        })
}

/// Draw `series` as lines with points, with a legend, into `area`.
pub fn line_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    axes: &Axes<'_>,
    series: &[Series],
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let (xmin, xmax) = extent(series, |p| p.0).ok_or("no points to plot")?;
    let (ymin, ymax) = match axes.y_range {
        Some(r) => r,
        None => {
            let (a, b) = extent(series, |p| p.1).ok_or("no points to plot")?;
            (
                a.floor(),
                if b.ceil() > a.floor() {
                    b.ceil()
                } else {
                    a.floor() + 1.0
                },
            )
        }
    };
    let pad = ((xmax - xmin) * 0.05).max(0.3);
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((xmin - pad)..(xmax + pad), ymin..ymax)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_labels(axes.x_labels)
        .x_desc(axes.x_desc)
        .y_desc(axes.y_desc)
        .x_label_formatter(axes.x_fmt)
        .y_label_formatter(axes.y_fmt)
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, s) in series.iter().enumerate() {
        let mut pts = s.points.clone();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(s.name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart
            .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))
            .map_err(|e| e.to_string())?;
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.85))
        .position(axes.legend.clone())
        .draw()
        .map_err(|e| e.to_string())
}
