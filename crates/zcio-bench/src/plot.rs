//! The one SVG plot helper of the benchmarks: a [`Figure`] of panels in
//! rows under a title, each panel a chart of [`Lines`] (points joined per
//! series, with a legend, on linear or logarithmic axes) or of labelled
//! [`Bars`], drawn with plotters. A benchmark's `plot.rs` only turns its
//! rows into series and bars and says which axes, units and titles they
//! get.
//!
//! Points are given in data units; an axis on a [`Scale::Log2`] or
//! [`Scale::Log10`] scale plots their logarithm and labels its ticks with
//! the values (a log2 axis only at whole powers of two).

use std::collections::BTreeMap;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Where a chart's legend goes.
pub use plotters::prelude::SeriesLabelPosition as Legend;

/// Height of the figure's title.
const TITLE_H: u32 = 60;
/// Font sizes: the figure's title, a panel's title, a bar's value.
const TITLE_FONT: u32 = 24;
const PANEL_FONT: u32 = 20;
const VALUE_FONT: u32 = 14;

fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// One line of a chart: a name and its points (x, y) in data units.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend entry.
    pub name: String,
    /// Points (x, y).
    pub points: Vec<(f64, f64)>,
}

/// One series per name of `points` (name, x, y), in name order.
pub fn series<N: Ord + ToString>(points: impl IntoIterator<Item = (N, f64, f64)>) -> Vec<Series> {
    let mut by: BTreeMap<N, Vec<(f64, f64)>> = BTreeMap::new();
    for (n, x, y) in points {
        by.entry(n).or_default().push((x, y));
    }
    by.into_iter()
        .map(|(n, points)| Series {
            name: n.to_string(),
            points,
        })
        .collect()
}

/// Put `series` in the order of `names` (the others after them, as they
/// were).
pub fn order(series: &mut [Series], names: &[&str]) {
    series.sort_by_key(|s| {
        names
            .iter()
            .position(|n| *n == s.name)
            .unwrap_or(usize::MAX)
    });
}

/// How an axis maps data to the chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// As they are.
    Linear,
    /// log2 (sizes, counts that double); ticks at whole powers of two.
    Log2,
    /// log10 (rates, times over decades).
    Log10,
}

impl Scale {
    /// A value in chart coordinates (`None`: not finite, or not positive on
    /// a log scale).
    fn to_chart(self, v: f64) -> Option<f64> {
        let c = match self {
            Scale::Linear => v,
            Scale::Log2 if v > 0.0 => v.log2(),
            Scale::Log10 if v > 0.0 => v.log10(),
            _ => return None,
        };
        c.is_finite().then_some(c)
    }

    /// The label of the tick at chart coordinate `c`.
    fn tick(self, c: f64, fmt: fn(f64) -> String) -> String {
        match self {
            Scale::Linear => fmt(c),
            Scale::Log2 if (c - c.round()).abs() < 1e-6 => fmt(2f64.powf(c.round())),
            Scale::Log2 => String::new(),
            Scale::Log10 => fmt(10f64.powf(c)),
        }
    }
}

/// An axis of a [`Lines`] chart.
#[derive(Debug, Clone, Copy)]
pub struct Axis {
    /// What it shows, with its unit.
    pub desc: &'static str,
    /// Linear or logarithmic.
    pub scale: Scale,
    /// Tick labels from values (in data units).
    pub fmt: fn(f64) -> String,
    /// How many tick labels to aim for.
    pub labels: usize,
}

impl Axis {
    /// An axis with about 10 tick labels.
    pub fn new(desc: &'static str, scale: Scale, fmt: fn(f64) -> String) -> Self {
        Self {
            desc,
            scale,
            fmt,
            labels: 10,
        }
    }

    /// Aim for `n` tick labels.
    pub fn labels(self, n: usize) -> Self {
        Self { labels: n, ..self }
    }
}

/// The y range of a [`Lines`] chart.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum YRange {
    /// The data's, rounded out to whole units of the chart (whole decades
    /// on a log10 axis).
    Rounded,
    /// From 0 to 10 % above the largest value (linear axes).
    FromZero,
    /// Fixed, in chart coordinates (see [`share_y`]).
    Fixed(f64, f64),
}

/// A chart of lines with points, one per series, with a legend.
#[derive(Debug, Clone)]
pub struct Lines {
    /// Title above the chart.
    pub title: String,
    /// The x axis.
    pub x: Axis,
    /// The y axis.
    pub y: Axis,
    /// The y range.
    pub y_range: YRange,
    /// Where the legend goes.
    pub legend: Legend,
    /// The lines.
    pub series: Vec<Series>,
}

impl Lines {
    /// A chart of `series`, its y range [`YRange::Rounded`], its legend in
    /// the upper left corner.
    pub fn new(title: impl Into<String>, x: Axis, y: Axis, series: Vec<Series>) -> Self {
        Self {
            title: title.into(),
            x,
            y,
            y_range: YRange::Rounded,
            legend: Legend::UpperLeft,
            series,
        }
    }

    /// With the y range `r`.
    pub fn y_range(self, r: YRange) -> Self {
        Self { y_range: r, ..self }
    }

    /// With the legend at `l`.
    pub fn legend(self, l: Legend) -> Self {
        Self { legend: l, ..self }
    }

    /// The series in chart coordinates: points sorted by x, those a log
    /// axis cannot show left out, series without points left out.
    fn chart_series(&self) -> Vec<Series> {
        self.series
            .iter()
            .map(|s| {
                let mut points: Vec<(f64, f64)> = s
                    .points
                    .iter()
                    .filter_map(|&(x, y)| {
                        Some((self.x.scale.to_chart(x)?, self.y.scale.to_chart(y)?))
                    })
                    .collect();
                points.sort_by(|a, b| a.0.total_cmp(&b.0));
                Series {
                    name: s.name.clone(),
                    points,
                }
            })
            .filter(|s| !s.points.is_empty())
            .collect()
    }
}

/// A chart of labelled bars (one colour each), with their values above
/// them.
#[derive(Debug, Clone)]
pub struct Bars {
    /// Title above the chart.
    pub title: String,
    /// What the bars show, with the unit.
    pub y_desc: &'static str,
    /// The values' labels (on the y axis and above the bars).
    pub fmt: fn(f64) -> String,
    /// (label, value) per bar, left to right.
    pub bars: Vec<(String, f64)>,
}

impl Bars {
    /// Bars of `bars` (label, value).
    pub fn new(
        title: impl Into<String>,
        y_desc: &'static str,
        fmt: fn(f64) -> String,
        bars: Vec<(String, f64)>,
    ) -> Self {
        Self {
            title: title.into(),
            y_desc,
            fmt,
            bars,
        }
    }
}

/// One panel of a figure.
#[derive(Debug, Clone)]
pub enum Panel {
    /// Lines with points.
    Lines(Lines),
    /// Labelled bars.
    Bars(Bars),
}

impl From<Lines> for Panel {
    fn from(l: Lines) -> Self {
        Panel::Lines(l)
    }
}

impl From<Bars> for Panel {
    fn from(b: Bars) -> Self {
        Panel::Bars(b)
    }
}

impl Panel {
    /// Nothing to draw.
    fn is_empty(&self) -> bool {
        match self {
            Panel::Lines(l) => l.chart_series().is_empty(),
            Panel::Bars(b) => b.bars.is_empty(),
        }
    }

    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        match self {
            Panel::Lines(l) => draw_lines(area, l),
            Panel::Bars(b) => draw_bars(area, b),
        }
    }
}

/// The rounded-out y range of `series` (chart coordinates, as
/// [`YRange::Rounded`]).
fn rounded(series: &[Series]) -> Option<(f64, f64)> {
    let (lo, hi) = extent(series, |p| p.1)?;
    let lo = lo.floor();
    Some((lo, hi.ceil().max(lo + 1.0)))
}

/// The (min, max) of `f` over all points of `series`.
fn extent(series: &[Series], f: impl Fn(&(f64, f64)) -> f64) -> Option<(f64, f64)> {
    series
        .iter()
        .flat_map(|s| s.points.iter())
        .map(f)
        .fold(None, |acc, v| match acc {
            None => Some((v, v)),
            Some((a, b)) => Some((f64::min(a, v), f64::max(b, v))),
        })
}

/// Give the [`Lines`] panels among `panels` one y range: the rounded-out
/// range of all their points (so that they compare at a glance).
pub fn share_y(panels: &mut [Panel]) {
    let all: Vec<Series> = panels
        .iter()
        .filter_map(|p| match p {
            Panel::Lines(l) => Some(l.chart_series()),
            Panel::Bars(_) => None,
        })
        .flatten()
        .collect();
    if let Some((lo, hi)) = rounded(&all) {
        for p in panels {
            if let Panel::Lines(l) = p {
                l.y_range = YRange::Fixed(lo, hi);
            }
        }
    }
}

fn draw_lines<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, l: &Lines) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let series = l.chart_series();
    let (xmin, xmax) = extent(&series, |p| p.0).ok_or("no points to plot")?;
    let (ymin, ymax) = match l.y_range {
        YRange::Fixed(a, b) => (a, b),
        YRange::Rounded => rounded(&series).ok_or("no points to plot")?,
        YRange::FromZero => {
            let top = extent(&series, |p| p.1).map_or(0.0, |e| e.1.max(0.0));
            (0.0, (top * 1.1).max(1e-3))
        }
    };
    let pad = ((xmax - xmin) * 0.05).max(0.3);
    let (x, y) = (l.x, l.y);
    let mut chart = ChartBuilder::on(area)
        .caption(&l.title, ("sans-serif", PANEL_FONT))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((xmin - pad)..(xmax + pad), ymin..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_labels(x.labels)
        .y_labels(y.labels)
        .x_desc(x.desc)
        .y_desc(y.desc)
        .x_label_formatter(&|c| x.scale.tick(*c, x.fmt))
        .y_label_formatter(&|c| y.scale.tick(*c, y.fmt))
        .draw()
        .map_err(err)?;
    for (i, s) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(s.points.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(s.name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart
            .draw_series(s.points.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.85))
        .position(l.legend.clone())
        .draw()
        .map_err(err)
}

fn draw_bars<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, b: &Bars) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let n = b.bars.len().max(1);
    let top = b.bars.iter().map(|b| b.1).fold(0.0f64, f64::max).max(1e-6) * 1.15;
    let names: Vec<&str> = b.bars.iter().map(|b| b.0.as_str()).collect();
    let label = |x: &f64| {
        let i = x.round();
        match names.get(i as usize) {
            Some(name) if (x - i).abs() < 1e-6 && i >= 0.0 => name.to_string(),
            _ => String::new(),
        }
    };
    let fmt = b.fmt;
    let mut chart = ChartBuilder::on(area)
        .caption(&b.title, ("sans-serif", PANEL_FONT))
        .margin(12)
        .x_label_area_size(60)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0.0..top)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        // Finer than one per bar, so that every bar's position is a tick
        // (only those get a label).
        .x_labels(n * 4)
        .x_label_formatter(&label)
        .y_desc(b.y_desc)
        .y_label_formatter(&|y| fmt(*y))
        .draw()
        .map_err(err)?;
    let value_style = ("sans-serif", VALUE_FONT)
        .into_text_style(area)
        .pos(Pos::new(HPos::Center, VPos::Bottom));
    for (i, (_, v)) in b.bars.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let x = i as f64;
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(x - 0.35, 0.0), (x + 0.35, *v)],
                color.filled(),
            )))
            .map_err(err)?;
        chart
            .draw_series(std::iter::once(Text::new(
                fmt(*v),
                (x, *v + top * 0.01),
                value_style.clone(),
            )))
            .map_err(err)?;
    }
    Ok(())
}

/// A row of panels: `cols` cells of `height` pixels (the panels fill the
/// first ones).
struct Row {
    height: u32,
    cols: usize,
    panels: Vec<Panel>,
}

/// An SVG figure: a title over rows of panels.
pub struct Figure {
    title: Option<String>,
    width: u32,
    rows: Vec<Row>,
}

impl Figure {
    /// A figure `width` pixels wide, under `title` (`None`: none; the
    /// panels' titles say what they show).
    pub fn new(title: Option<&str>, width: u32) -> Self {
        Self {
            title: title.map(str::to_string),
            width,
            rows: Vec::new(),
        }
    }

    /// Add `panels` (those with nothing to draw left out) in rows of `cols`
    /// (fewer if fewer panels are left), each row `height` pixels high.
    pub fn grid(mut self, height: u32, cols: usize, panels: Vec<Panel>) -> Self {
        let mut panels: Vec<Panel> = panels.into_iter().filter(|p| !p.is_empty()).collect();
        let cols = cols.clamp(1, panels.len().max(1));
        while !panels.is_empty() {
            let rest = panels.split_off(cols.min(panels.len()));
            self.rows.push(Row {
                height,
                cols,
                panels,
            });
            panels = rest;
        }
        self
    }

    /// Add one row of `cols` cells, `height` pixels high, holding `panels`
    /// (those with nothing to draw left out; none: no row).
    pub fn row(mut self, height: u32, cols: usize, panels: Vec<Panel>) -> Self {
        let panels: Vec<Panel> = panels.into_iter().filter(|p| !p.is_empty()).collect();
        if !panels.is_empty() {
            self.rows.push(Row {
                height,
                cols: cols.max(panels.len()),
                panels,
            });
        }
        self
    }

    /// Draw the figure into the SVG file `path` (`Err` if it has no panel).
    pub fn write(&self, path: &Path) -> Result<(), String> {
        if self.rows.is_empty() {
            return Err("no rows to plot".into());
        }
        let title_h = if self.title.is_some() { TITLE_H } else { 0 };
        let height = title_h + self.rows.iter().map(|r| r.height).sum::<u32>();
        let root = SVGBackend::new(path, (self.width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut rest = match &self.title {
            Some(t) => root.titled(t, ("sans-serif", TITLE_FONT)).map_err(err)?,
            None => root.clone(),
        };
        for (i, r) in self.rows.iter().enumerate() {
            // The last row takes what is left (the title may take less than
            // its share).
            let (band, below) = if i + 1 == self.rows.len() {
                (rest.clone(), rest.clone())
            } else {
                rest.split_vertically(r.height)
            };
            let cells = band.split_evenly((1, r.cols));
            for (p, cell) in r.panels.iter().zip(cells.iter()) {
                p.draw(cell)?;
            }
            rest = below;
        }
        root.present().map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_axes_plot_logarithms_and_label_values() {
        assert_eq!(Scale::Log2.to_chart(4096.0), Some(12.0));
        assert_eq!(Scale::Log10.to_chart(0.0), None);
        assert_eq!(Scale::Linear.to_chart(-1.5), Some(-1.5));
        let f: fn(f64) -> String = |v| format!("{v}");
        assert_eq!(Scale::Log2.tick(3.0, f), "8");
        assert_eq!(Scale::Log2.tick(3.5, f), "");
        assert_eq!(Scale::Log10.tick(2.0, f), "100");
    }

    #[test]
    fn series_group_by_name_and_follow_an_order() {
        let mut s = series([("b", 1.0, 2.0), ("a", 1.0, 3.0), ("b", 2.0, 4.0)]);
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].name.as_str(), s[1].points.len()), ("a", 2));
        order(&mut s, &["b", "a"]);
        assert_eq!(s[0].name, "b");
    }

    #[test]
    fn a_figure_is_valid_svg_with_its_titles_and_legends() {
        let dir = std::env::temp_dir().join(format!("zcio-bench-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.svg");
        let x = Axis::new("size", Scale::Log2, |v| format!("{v}"));
        let y = Axis::new("GB/s <&>", Scale::Log10, |v| format!("{v:.1}"));
        let lines = Lines::new(
            "lines",
            x,
            y,
            series([
                ("pipe", 64.0, 1.0),
                ("pipe", 4096.0, 10.0),
                ("ring", 64.0, 2.0),
            ]),
        );
        let bars = Bars::new(
            "bars",
            "pkt/s",
            |v| format!("{v}"),
            vec![("vec".into(), 5.0)],
        );
        let empty = Lines::new("empty", x, y, Vec::new());
        let mut top = vec![Panel::from(lines.clone()), lines.into()];
        share_y(&mut top);
        Figure::new(Some("a figure"), 800)
            .grid(300, 2, top)
            .row(300, 2, vec![bars.into(), empty.into()])
            .write(&path)
            .unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        for text in [
            "a figure",
            "lines",
            "bars",
            "pipe",
            "ring",
            "vec",
            "pkt/s",
            "GB/s &lt;&amp;&gt;",
        ] {
            assert!(svg.contains(text), "{text} missing");
        }
        assert!(!svg.contains(">empty<"));
        assert_eq!(
            Figure::new(None, 100)
                .grid(100, 1, Vec::new())
                .write(&path)
                .unwrap_err(),
            "no rows to plot"
        );
    }
}
