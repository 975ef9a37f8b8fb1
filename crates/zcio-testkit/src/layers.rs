//! The import graph of a crate's top-level modules, read from its sources:
//! the `crate::…` paths (including `use crate::{a, b}` groups and
//! `super::super::…` paths that climb to the crate root) between top-level
//! modules, with comments, strings and character literals skipped. The
//! layering tests of zcio and of its benchmark crate check it for cycles
//! and for imports from a higher layer.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module → the top-level modules it imports.
pub type Graph = BTreeMap<String, BTreeSet<String>>;

/// `src` with comments, string literals and character literals replaced by
/// spaces (line breaks kept).
fn strip(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let blank = |out: &mut String, s: &[char]| {
        out.extend(s.iter().map(|&ch| if ch == '\n' { '\n' } else { ' ' }));
    };
    let mut i = 0;
    while i < c.len() {
        let at = |k: usize| c.get(k).copied().unwrap_or('\0');
        let start = i;
        if c[i] == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            loop {
                if i >= c.len() {
                    break;
                } else if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if (c[i] == 'r' || (c[i] == 'b' && at(i + 1) == 'r'))
            && (i == 0 || !ident(c[i - 1]))
            && {
                let mut k = i + if c[i] == 'b' { 2 } else { 1 };
                while at(k) == '#' {
                    k += 1;
                }
                at(k) == '"'
            }
        {
            // A raw string: r"…", r#"…"#, br"…".
            i += if c[i] == 'b' { 2 } else { 1 };
            let mut hashes = 0;
            while c[i] == '#' {
                hashes += 1;
                i += 1;
            }
            i += 1;
            while i < c.len() {
                if c[i] == '"' && (1..=hashes).all(|h| at(i + h) == '#') {
                    i += 1 + hashes;
                    break;
                }
                i += 1;
            }
        } else if c[i] == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c[i] == '\'' && at(i + 1) == '\\' {
            // An escaped character literal: '\n', '\'', '\u{..}'.
            i += 3;
            while i < c.len() && c[i] != '\'' {
                i += 1;
            }
            i += 1;
        } else if c[i] == '\'' && at(i + 2) == '\'' {
            i += 3;
        } else {
            // Code (a lifetime's quote included).
            out.push(c[i]);
            i += 1;
            continue;
        }
        blank(&mut out, &c[start..i.min(c.len())]);
    }
    out
}

/// Identifiers, `::` and single punctuation characters of stripped code.
fn tokens(code: &str) -> Vec<String> {
    let c: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        if c[i].is_whitespace() {
            i += 1;
        } else if c[i].is_alphanumeric() || c[i] == '_' {
            let s = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push(c[s..i].iter().collect());
        } else if c[i] == ':' && c.get(i + 1) == Some(&':') {
            out.push("::".into());
            i += 2;
        } else {
            out.push(c[i].to_string());
            i += 1;
        }
    }
    out
}

/// The first segments of the paths that start at `t[i]` (after
/// `crate::`): one identifier, or each item of a `{…}` group.
fn first_segments(t: &[String], i: usize) -> Vec<String> {
    let word = |s: &str| s.chars().all(|ch| ch.is_alphanumeric() || ch == '_');
    match t.get(i).map(String::as_str) {
        Some("{") => {
            let mut out = Vec::new();
            let (mut depth, mut expect) = (0, true);
            for tok in &t[i..] {
                match tok.as_str() {
                    "{" => {
                        depth += 1;
                        expect = depth == 1;
                    }
                    "}" => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    "," if depth == 1 => expect = true,
                    s if expect && depth == 1 && word(s) => {
                        out.push(s.to_string());
                        expect = false;
                    }
                    _ => expect = false,
                }
            }
            out
        }
        Some(s) if word(s) => vec![s.to_string()],
        _ => Vec::new(),
    }
}

/// The top-level modules the file of module path `path` (e.g. `["ring",
/// "check"]`) names through `crate::…` or `super::…` paths that reach the
/// crate root.
pub fn imports(path: &[String], src: &str) -> BTreeSet<String> {
    let t = tokens(&strip(src));
    let mut out = BTreeSet::new();
    // Inline modules (`mod tests { … }`) add to the path: (name, depth).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0;
    let mut i = 0;
    while i < t.len() {
        let prev = if i > 0 { t[i - 1].as_str() } else { "" };
        let next = |k: usize| t.get(i + k).map(String::as_str);
        match t[i].as_str() {
            "{" => depth += 1,
            "}" => {
                if inline.last().is_some_and(|m| m.1 == depth) {
                    inline.pop();
                }
                depth -= 1;
            }
            "mod" if next(2) == Some("{") => {
                inline.push((t[i + 1].clone(), depth + 1));
            }
            "crate" if prev != "$" && prev != "::" && next(1) == Some("::") => {
                out.extend(first_segments(&t, i + 2));
            }
            "super" if prev != "::" => {
                let mut ups = 0;
                let mut k = i;
                while t.get(k).map(String::as_str) == Some("super")
                    && t.get(k + 1).map(String::as_str) == Some("::")
                {
                    ups += 1;
                    k += 2;
                }
                if ups > 0 && ups >= path.len() + inline.len() {
                    out.extend(first_segments(&t, k));
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The import graph of the top-level modules of the crate whose sources
/// are in `src` (the crate root files `lib.rs` and `main.rs` are not
/// modules; names that are no module, such as `fmt`, are left out).
pub fn module_graph(src: &Path) -> Graph {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut graph = Graph::new();
    let mut named = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(src).expect("under src");
        let mut path: Vec<String> = rel
            .iter()
            .map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string())
            .collect();
        if path.last().is_some_and(|l| l == "mod") {
            path.pop();
        }
        if path == ["lib"] || path == ["main"] {
            continue;
        }
        graph.entry(path[0].clone()).or_default();
        let text = std::fs::read_to_string(f).expect("read a source file");
        named.push((path[0].clone(), imports(&path, &text)));
    }
    for (module, targets) in named {
        let known: Vec<String> = targets
            .into_iter()
            .filter(|t| *t != module && graph.contains_key(t))
            .collect();
        graph.get_mut(&module).expect("module").extend(known);
    }
    graph
}

/// The paths that start at `t[i]` (a use tree or an expression path), each
/// as its segments: `a::b::{c, d::{e, f as g}}` gives `a::b::c`, `a::b::d::e`
/// and `a::b::d::f`; `a::b::*` and `a::{self}` give `a::b` and `a`.
fn full_paths(t: &[String], i: usize) -> Vec<Vec<String>> {
    fn tree(t: &[String], mut i: usize, prefix: &[String], out: &mut Vec<Vec<String>>) -> usize {
        let word = |s: &str| s.chars().all(|ch| ch.is_alphanumeric() || ch == '_');
        let mut path = prefix.to_vec();
        loop {
            match t.get(i).map(String::as_str) {
                Some("{") => {
                    i += 1;
                    while i < t.len() && t[i] != "}" {
                        if t[i] == "," {
                            i += 1;
                            continue;
                        }
                        let next = tree(t, i, &path, out);
                        i = next.max(i + 1);
                    }
                    return i + 1;
                }
                Some("*") => {
                    out.push(path);
                    return i + 1;
                }
                Some("self") if path.len() > prefix.len() || !prefix.is_empty() => {
                    out.push(path);
                    return i + 1;
                }
                Some(s) if word(s) => {
                    path.push(s.to_string());
                    i += 1;
                    if t.get(i).map(String::as_str) == Some("::") {
                        i += 1;
                        continue;
                    }
                    if t.get(i).map(String::as_str) == Some("as") {
                        i += 2;
                    }
                    out.push(path);
                    return i;
                }
                _ => {
                    if !path.is_empty() {
                        out.push(path);
                    }
                    return i;
                }
            }
        }
    }
    let mut out = Vec::new();
    tree(t, i, &[], &mut out);
    out
}

/// Every path a file of module path `path` names, made absolute (segments
/// from the crate root): `crate::…`, `super::…` and `self::…` paths, and
/// `use child::…` of a module declared in the file (`children`).
fn absolute_paths(path: &[String], src: &str, children: &BTreeSet<String>) -> Vec<Vec<String>> {
    let t = tokens(&strip(src));
    let mut out = Vec::new();
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0;
    let here = |inline: &[(String, usize)]| -> Vec<String> {
        path.iter()
            .cloned()
            .chain(inline.iter().map(|m| m.0.clone()))
            .collect()
    };
    let mut i = 0;
    while i < t.len() {
        let prev = if i > 0 { t[i - 1].as_str() } else { "" };
        let next = |k: usize| t.get(i + k).map(String::as_str);
        // A file's unit tests (`mod tests { … }`) may drive it through the
        // modules that use it: their paths are not the file's imports.
        let in_tests = inline.iter().any(|m| m.0 == "tests");
        let rooted = |base: Vec<String>, at: usize, out: &mut Vec<Vec<String>>| {
            if in_tests {
                return;
            }
            for p in full_paths(&t, at) {
                out.push(base.iter().cloned().chain(p).collect());
            }
        };
        match t[i].as_str() {
            "{" => depth += 1,
            "}" => {
                if inline.last().is_some_and(|m| m.1 == depth) {
                    inline.pop();
                }
                depth -= 1;
            }
            "mod" if next(2) == Some("{") => inline.push((t[i + 1].clone(), depth + 1)),
            "crate" if prev != "$" && prev != "::" && next(1) == Some("::") => {
                rooted(Vec::new(), i + 2, &mut out);
            }
            "self" if prev != "::" && next(1) == Some("::") => {
                rooted(here(&inline), i + 2, &mut out);
            }
            "super" if prev != "::" && next(1) == Some("::") => {
                let mut base = here(&inline);
                let mut k = i;
                while t.get(k).map(String::as_str) == Some("super")
                    && t.get(k + 1).map(String::as_str) == Some("::")
                {
                    base.pop();
                    k += 2;
                }
                rooted(base, k, &mut out);
            }
            "use" if inline.is_empty() && next(1).is_some_and(|n| children.contains(n)) => {
                rooted(path.to_vec(), i + 1, &mut out);
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// The import graph of every module *file* of the crate whose sources are
/// in `src` (nodes are module paths such as `channel::core`; the crate root
/// is left out; so are the paths inside a file's `mod tests { … }`). A path is resolved to the deepest module file it names and,
/// where that file re-exports the item from one of its submodules
/// (`pub use core::Core;`), to that submodule. A module and the modules
/// nested in it are one unit: an edge between them is not an import.
pub fn file_graph(src: &Path) -> Graph {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut texts = BTreeMap::new();
    for f in &files {
        let rel = f.strip_prefix(src).expect("under src");
        let mut path: Vec<String> = rel
            .iter()
            .map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string())
            .collect();
        if path.last().is_some_and(|l| l == "mod") {
            path.pop();
        }
        if path == ["lib"] || path == ["main"] {
            path.clear();
        }
        texts.insert(
            path,
            std::fs::read_to_string(f).expect("read a source file"),
        );
    }
    let modules: BTreeSet<Vec<String>> = texts.keys().cloned().collect();
    let children = |m: &[String]| -> BTreeSet<String> {
        modules
            .iter()
            .filter(|c| c.len() == m.len() + 1 && c.starts_with(m))
            .map(|c| c[m.len()].clone())
            .collect()
    };
    let deepest = |p: &[String]| -> (Vec<String>, Option<String>) {
        (0..=p.len())
            .rev()
            .find(|&n| modules.contains(&p[..n]))
            .map(|n| (p[..n].to_vec(), p.get(n).cloned()))
            .unwrap_or_default()
    };
    // Per module: item name -> the submodule it is re-exported from.
    let mut reexports: BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    for (m, text) in &texts {
        let t = tokens(&strip(text));
        let kids = children(m);
        for (i, tok) in t.iter().enumerate() {
            if tok != "use" {
                continue;
            }
            let mut at = i + 1;
            if t.get(at).map(String::as_str) == Some("self") {
                at += 2;
            }
            if !t.get(at).is_some_and(|n| kids.contains(n)) {
                continue;
            }
            for leaf in full_paths(&t, at) {
                let abs: Vec<String> = m.iter().cloned().chain(leaf).collect();
                let (target, item) = deepest(&abs);
                if let (Some(name), true) = (abs.last(), target.len() > m.len()) {
                    let _ = item;
                    reexports
                        .entry(m.clone())
                        .or_default()
                        .insert(name.clone(), target);
                }
            }
        }
    }
    let join = |p: &[String]| p.join("::");
    let mut graph = Graph::new();
    for (m, text) in &texts {
        if m.is_empty() {
            continue;
        }
        let node = graph.entry(join(m)).or_default();
        for p in absolute_paths(m, text, &children(m)) {
            let (mut target, item) = deepest(&p);
            if let Some(via) = item.and_then(|n| reexports.get(&target)?.get(&n).cloned()) {
                target = via;
            }
            let nested = target.starts_with(m) || m.starts_with(&target);
            if !target.is_empty() && !nested {
                node.insert(join(&target));
            }
        }
    }
    graph
}

/// A cycle of `graph` (its modules in order, the first repeated at the
/// end), if it has one.
pub fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit<'a>(
        g: &'a Graph,
        m: &'a str,
        done: &mut BTreeSet<&'a str>,
        stack: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|s| *s == m) {
            let mut cycle: Vec<String> = stack[at..].iter().map(|s| s.to_string()).collect();
            cycle.push(m.to_string());
            return Some(cycle);
        }
        if !done.insert(m) {
            return None;
        }
        stack.push(m);
        for next in g.get(m).into_iter().flatten() {
            if let Some(c) = visit(g, next, done, stack) {
                return Some(c);
            }
        }
        stack.pop();
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|m| visit(graph, m, &mut done, &mut Vec::new()))
}

/// The imports of `graph` that point from a module to one in a higher
/// layer, as `"from (layer a) -> to (layer b)"`.
pub fn upward(graph: &Graph, layer: impl Fn(&str) -> u8) -> Vec<String> {
    graph
        .iter()
        .flat_map(|(m, ts)| ts.iter().map(move |t| (m, t)))
        .filter(|(m, t)| layer(t) > layer(m))
        .map(|(m, t)| format!("{m} (layer {}) -> {t} (layer {})", layer(m), layer(t)))
        .collect()
}

/// The layering check both layering tests make: panics, naming the modules,
/// if `graph` has an import cycle or an import from a higher `layer` (`doc`
/// names where the layers are described).
pub fn assert_layered(graph: &Graph, layer: impl Fn(&str) -> u8, doc: &str) {
    if let Some(cycle) = find_cycle(graph) {
        panic!(
            "import cycle between top-level modules: {}",
            cycle.join(" -> ")
        );
    }
    let up = upward(graph, layer);
    assert!(
        up.is_empty(),
        "imports from a higher layer (see {doc}): {up:?}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scan_reads_paths_and_skips_comments_and_strings() {
        let src = r##"
            use crate::{a, b::c, d::{e, f}};
            use crate::g::h;
            // use crate::comment;
            /* use crate::block; /* nested */ crate::still_comment */
            let s = "crate::string \" crate::escaped";
            let r = r#"crate::raw "quoted""#;
            let q = '"'; let lt: &'static str = x; let e = '\'';
            let v = crate::i::f(super::j::k); // from x.rs, super is the root
            macro_rules! m { () => { $crate::macro_path } }
            pub(crate) fn p() {}
            mod tests {
                use super::super::l;
                use super::same_file;
            }
        "##;
        let got = imports(&["x".to_string()], src);
        let want: BTreeSet<String> = ["a", "b", "d", "g", "i", "j", "l"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(got, want);
        // From a file two levels down, `super::super` is the crate root.
        let deep = imports(&["x".to_string(), "y".to_string()], "use super::super::z;");
        assert!(deep.contains("z"));

        let mut g = Graph::new();
        for (m, ts) in [("a", &["b"][..]), ("b", &["c"]), ("c", &["a"]), ("d", &[])] {
            g.insert(m.into(), ts.iter().map(|s| s.to_string()).collect());
        }
        assert_eq!(find_cycle(&g).unwrap().join(" -> "), "a -> b -> c -> a");
        g.get_mut("c").unwrap().clear();
        assert_eq!(find_cycle(&g), None);
    }

    #[test]
    fn the_file_graph_resolves_relative_paths_and_re_exports() {
        let dir = std::env::temp_dir().join(format!("zcio-layers-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("ch")).unwrap();
        let put = |p: &str, s: &str| std::fs::write(dir.join(p), s).unwrap();
        put("lib.rs", "mod ch; mod low;");
        put("low.rs", "pub fn f() {}");
        put(
            "ch/mod.rs",
            "mod core; mod linger; pub use core::Core; pub fn g() { crate::low::f() }",
        );
        put("ch/core.rs", "use super::linger::linger; pub struct Core;");
        put(
            "ch/linger.rs",
            "use super::Core; use crate::ch::{self, g}; pub fn linger() {}",
        );
        let g = file_graph(&dir);
        let _ = std::fs::remove_dir_all(&dir);
        let edges = |m: &str| g[m].iter().cloned().collect::<Vec<_>>();
        assert_eq!(edges("ch"), ["low"]);
        assert_eq!(edges("ch::core"), ["ch::linger"]);
        // `super::Core` is `core`'s, re-exported by `ch`; `ch` itself is no edge.
        assert_eq!(edges("ch::linger"), ["ch::core"]);
        assert_eq!(
            find_cycle(&g).unwrap().join(" -> "),
            "ch::core -> ch::linger -> ch::core"
        );
    }
}
