//! The guides' code blocks stay true: every block names its language;
//! every Rust block is either a doctest (compiled and run by `cargo test`
//! through `zcio::guides`, or `no_run` where it needs a network or
//! another host) or, marked `ignore`, a quotation of an example program
//! announced by `<!-- excerpt: PATH -->` on the line before, whose lines
//! must appear in that program in order (the program is compiled and run
//! by `scripts/test`). A line starting `// …` (in C `/* …`) in a quotation
//! stands for lines left out (and may say what comes next). Every C block
//! is such a quotation or a translation unit that compiles against
//! `include/` (`cc -fsyntax-only`; skipped with a reason without `cc`).
//! Every C++ block is such a quotation or, announced by
//! `<!-- file: PATH -->`, the whole program PATH (which `scripts/test-cpp`
//! compiles and runs).

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn guides() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    v.push(root().join("README.md"));
    v.sort();
    v
}

/// A fenced block: its info string, first line number, lines, and the
/// line just before the fence.
struct Block {
    info: String,
    line: usize,
    body: Vec<String>,
    before: String,
}

fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        if let Some(info) = lines[i].strip_prefix("```") {
            let start = i;
            let mut body = Vec::new();
            i += 1;
            while i < lines.len() && lines[i].trim_end() != "```" {
                body.push(lines[i].to_string());
                i += 1;
            }
            out.push(Block {
                info: info.trim().to_string(),
                line: start + 1,
                body,
                before: if start > 0 {
                    lines[start - 1].to_string()
                } else {
                    String::new()
                },
            });
        }
        i += 1;
    }
    out
}

/// Whether the non-blank lines of `quote` appear in `source` in order
/// (trimmed; `// …` skips ahead). Returns the first line not found.
fn missing_line(quote: &[String], source: &str) -> Option<String> {
    let src: Vec<&str> = source.lines().map(str::trim).collect();
    let mut at = 0;
    for q in quote.iter().map(|l| l.trim()).filter(|l| !l.is_empty()) {
        if q.starts_with("// …") || q.starts_with("/* …") {
            continue;
        }
        match src[at..].iter().position(|s| *s == q) {
            Some(k) => at += k + 1,
            None => return Some(q.to_string()),
        }
    }
    None
}

/// Compile `body` as a C translation unit against `include/`; the
/// compiler's complaint if it does not compile (`None` without a compiler:
/// said once on stderr).
fn compile_c(body: &[String]) -> Option<String> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let child = Command::new(&cc)
        .args([
            "-std=c11",
            "-fsyntax-only",
            "-Werror=implicit-function-declaration",
            "-x",
            "c",
            "-",
        ])
        .arg("-I")
        .arg(root().join("include"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            eprintln!("skipped: compiling the guides' C blocks ({cc}: {e})");
            return None;
        }
    };
    let mut stdin = child.stdin.take().expect("piped");
    let _ = stdin.write_all(body.join("\n").as_bytes());
    drop(stdin);
    let out = child.wait_with_output().expect("cc");
    (!out.status.success()).then(|| {
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .take(3)
            .collect::<Vec<_>>()
            .join(" | ")
    })
}

#[test]
fn every_guide_block_is_compiled_or_quotes_a_compiled_program() {
    let mut bad = Vec::new();
    for g in guides() {
        let text = std::fs::read_to_string(&g).expect("read guide");
        let name = g.file_name().unwrap().to_string_lossy().into_owned();
        for b in blocks(&text) {
            let at = format!("{name}:{}", b.line);
            if b.info.is_empty() {
                bad.push(format!("{at}: a code block without a language (rustdoc would compile it as Rust; say text, sh, …)"));
                continue;
            }
            let mut tags = b.info.split(',').map(str::trim);
            let lang = tags.next();
            let tags: Vec<&str> = tags.collect();
            let excerpt = b
                .before
                .trim()
                .strip_prefix("<!-- excerpt: ")
                .and_then(|r| r.strip_suffix(" -->"));
            let path = match (lang, excerpt) {
                (Some("c"), None) => {
                    if let Some(e) = compile_c(&b.body) {
                        bad.push(format!("{at}: C block does not compile: {e}"));
                    }
                    continue;
                }
                (Some("c"), Some(p)) => p,
                (Some("cpp"), Some(p)) => p,
                (Some("cpp"), None) => {
                    let file = b
                        .before
                        .trim()
                        .strip_prefix("<!-- file: ")
                        .and_then(|r| r.strip_suffix(" -->"));
                    match file.map(|p| (p, std::fs::read_to_string(root().join(p)))) {
                        None => bad.push(format!(
                            "{at}: a C++ block must be a program (<!-- file: PATH --> before it) or quote one (<!-- excerpt: PATH -->)"
                        )),
                        Some((p, Err(e))) => bad.push(format!("{at}: file {p}: {e}")),
                        Some((p, Ok(src))) => {
                            if !src.lines().eq(b.body.iter().map(String::as_str)) {
                                bad.push(format!("{at}: the block is not the file {p}, line for line"));
                            }
                        }
                    }
                    continue;
                }
                (Some("rust"), _) if !tags.contains(&"ignore") => continue, // a doctest
                (Some("rust"), Some(p)) => p,
                (Some("rust"), None) => {
                    bad.push(format!("{at}: an ignored Rust block must quote a program (<!-- excerpt: PATH --> before it)"));
                    continue;
                }
                _ => continue,
            };
            match std::fs::read_to_string(root().join(path)) {
                Err(e) => bad.push(format!("{at}: excerpt of {path}: {e}")),
                Ok(src) => {
                    if let Some(l) = missing_line(&b.body, &src) {
                        bad.push(format!("{at}: not in {path} (in order): {l}"));
                    }
                }
            }
        }
    }
    assert!(bad.is_empty(), "guides out of date:\n{}", bad.join("\n"));
}

#[test]
fn the_checker_finds_quotations_and_what_they_miss() {
    let src = "fn a() {\n    let x = 1;\n    let y = 2;\n}\n";
    let q = |s: &[&str]| s.iter().map(|l| l.to_string()).collect::<Vec<_>>();
    assert_eq!(missing_line(&q(&["let x = 1;", "// …", "}"]), src), None);
    assert_eq!(
        missing_line(&q(&["let y = 2;", "let x = 1;"]), src),
        Some("let x = 1;".into())
    );
    let b =
        blocks("text\n<!-- excerpt: x.rs -->\n```rust,ignore\nlet x = 1;\n```\n```\nplain\n```\n");
    assert_eq!(b.len(), 2);
    assert_eq!(
        (b[0].info.as_str(), b[0].before.as_str()),
        ("rust,ignore", "<!-- excerpt: x.rs -->")
    );
    assert_eq!(
        (b[1].info.as_str(), b[1].body.as_slice()),
        ("", &["plain".to_string()][..])
    );
}
