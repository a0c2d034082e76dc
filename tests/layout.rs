//! The source tree keeps its walls: which top-level modules may use which, no import circle
//! between them, and no file past the size a reader can hold in mind.
//!
//! The graph is read from the source text: every `crate::name` path and every name in a
//! `use crate::{..}` group, outside comments and test modules (a test may reach anywhere).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Imports that would undo a wall: (from, to).
const FORBIDDEN: &[(&str, &str)] = &[
    ("host", "tools"),
    ("workflow", "tools"),
    ("tools", "session"),
    ("session", "cli"),
    ("gates", "session"),
    ("acp", "transport"),
    ("transport", "session"),
    ("transport", "acp"),
];

/// Past this a file is split by concern.
const MAX_LINES: usize = 600;

type Graph = BTreeMap<String, BTreeSet<String>>;

#[test]
fn forbidden_imports_are_absent() {
    let graph = graph();
    let found: Vec<String> = FORBIDDEN
        .iter()
        .filter(|(from, to)| graph.get(*from).is_some_and(|t| t.contains(*to)))
        .map(|(from, to)| format!("{from} -> {to}"))
        .collect();
    assert!(found.is_empty(), "forbidden imports: {found:?}");
}

#[test]
fn top_level_modules_form_no_circle() {
    let circles: Vec<Vec<String>> = components(&graph())
        .into_iter()
        .filter(|c| c.len() > 1)
        .collect();
    assert!(circles.is_empty(), "import circles: {circles:?}");
}

#[test]
fn no_source_file_is_over_the_limit() {
    let long: Vec<String> = rust_files(&src())
        .into_iter()
        .filter_map(|path| {
            let lines = std::fs::read_to_string(&path).ok()?.lines().count();
            (lines > MAX_LINES).then(|| format!("{} ({lines})", path.display()))
        })
        .collect();
    assert!(long.is_empty(), "files over {MAX_LINES} lines: {long:?}");
}

/// The reader itself: a group, a comment and a test module are read as meant.
#[test]
fn references_are_read_from_code_only() {
    let text = "use crate::{alpha, beta::{x, y}, gamma::z};\n\
                // crate::delta in a comment\n\
                let a = crate::epsilon::f(); // crate::zeta\n\
                #[cfg(test)]\nmod tests {\n    use crate::eta;\n}\n";
    let names: BTreeSet<String> = references(text).into_iter().collect();
    let want: BTreeSet<String> = ["alpha", "beta", "gamma", "epsilon"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(names, want);
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("src/ is readable").flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// Top-level module of each file → the top-level modules it names.
fn graph() -> Graph {
    let root = src();
    let files = rust_files(&root);
    let modules: BTreeSet<String> = files.iter().map(|p| top_module(&root, p)).collect();
    let mut graph = Graph::new();
    for path in files {
        let from = top_module(&root, &path);
        if from == "lib" || from == "main" || is_test_file(&path) {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("source is readable");
        let entry = graph.entry(from.clone()).or_default();
        for to in references(&text) {
            if to != from && modules.contains(&to) {
                entry.insert(to);
            }
        }
    }
    graph
}

fn top_module(root: &Path, path: &Path) -> String {
    let first = path
        .strip_prefix(root)
        .expect("under src/")
        .components()
        .next()
        .expect("a file under src/");
    let name = first.as_os_str().to_string_lossy();
    name.strip_suffix(".rs").unwrap_or(&name).to_string()
}

fn is_test_file(path: &Path) -> bool {
    let name = path.file_stem().unwrap_or_default().to_string_lossy();
    name == "tests" || name.ends_with("_tests")
}

/// The first path segment after each `crate::`, in code before the file's test module.
fn references(text: &str) -> Vec<String> {
    let code = without_comments(before_test_module(text));
    let mut names = Vec::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            names.extend(group_heads(group));
        } else {
            names.push(identifier(rest).to_string());
        }
    }
    names.retain(|n| !n.is_empty());
    names
}

/// The leading identifiers of a `{a, b::c, d::{..}}` group's items (text after the `{`).
fn group_heads(group: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0usize;
    let mut item_start = true;
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => item_start = true,
            c if item_start && !c.is_whitespace() => {
                heads.push(identifier(&group[i..]).to_string());
                item_start = false;
            }
            _ => {}
        }
    }
    heads
}

fn identifier(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

fn before_test_module(text: &str) -> &str {
    let mut offset = 0;
    let mut lines = text.split_inclusive('\n').peekable();
    while let Some(line) = lines.next() {
        if line.trim() == "#[cfg(test)]" {
            let next = lines.peek().map(|l| l.trim_start()).unwrap_or("");
            if next.starts_with("mod ") || next.starts_with("pub mod ") {
                return &text[..offset];
            }
        }
        offset += line.len();
    }
    text
}

fn without_comments(text: &str) -> String {
    text.lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Strongly connected components (Tarjan), each sorted; a component of two or more is a circle.
fn components(graph: &Graph) -> Vec<Vec<String>> {
    struct Walk<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        found: Vec<Vec<String>>,
    }
    impl<'g> Walk<'g> {
        fn visit(&mut self, v: &'g str) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.graph.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                component.sort();
                self.found.push(component);
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.found
}
