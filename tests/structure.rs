//! The structure drawn from the code: which module names which, outside
//! tests. Two rules of ARCHITECTURE.md are checked on it, so they hold by
//! test rather than by review:
//!
//! - **Layers.** A layer of this crate (a folder of `src/`) names only the
//!   layers its `mod.rs` lists under "May import:", and `agy_corpus` only
//!   where that list names it.
//! - **No import cycles between modules**, in this crate's library and
//!   binary and in each of the workspace's crates. A module and its own
//!   submodules are one concept (a split file), so edges between a module
//!   and its ancestors or descendants do not count.
//!
//! A third rule is the crate's own: **`unsafe` is rare and explained.**
//! `src/` holds at most 8 `unsafe` blocks (its test code included), each
//! right after a `// SAFETY:` comment, and the workspace's other crates
//! (`crates/*`, fake-agy) forbid `unsafe` at their roots.
//!
//! The parser is deliberately small: `use` trees, `crate::`/`super::` paths
//! in code, test code skipped (`#[cfg(test)]` items). The checker's own
//! tests at the end feed it a made-up tree with a cycle and a forbidden
//! import, and made-up code with unexplained and too many `unsafe` blocks,
//! so a parser that finds nothing fails.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path inside its crate, e.g. `["runner", "bind"]`.
type ModPath = Vec<String>;

/// One crate's modules, each with the code that is not test code.
struct Tree {
    modules: BTreeMap<ModPath, String>,
}

impl Tree {
    /// Reads the crate rooted at `root` (its `lib.rs` or `main.rs`),
    /// leaving out the files and folders in `skip` (relative to `src`).
    fn read(src: &Path, root_file: &str, skip: &[&str]) -> Tree {
        let mut modules = BTreeMap::new();
        let root = src.join(root_file);
        modules.insert(Vec::new(), non_test_code(&read(&root)));
        walk(src, src, skip, &mut modules);
        Tree { modules }
    }

    /// The modules `from` names outside its tests, by the longest module
    /// prefix of each path.
    fn names(&self, from: &ModPath) -> BTreeSet<ModPath> {
        let code = &self.modules[from];
        let mut out = BTreeSet::new();
        for path in paths_in(code) {
            if let Some(abs) = absolute(from, &path) {
                if let Some(m) = self.longest_module(&abs) {
                    out.insert(m);
                }
            }
        }
        out
    }

    fn longest_module(&self, path: &[String]) -> Option<ModPath> {
        (1..=path.len())
            .rev()
            .map(|n| path[..n].to_vec())
            .find(|p| self.modules.contains_key(p))
    }

    /// Edges between modules that are not one another's ancestor.
    fn edges(&self) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
        let mut edges = BTreeMap::new();
        for from in self.modules.keys() {
            let to: BTreeSet<ModPath> = self
                .names(from)
                .into_iter()
                .filter(|to| !to.starts_with(from) && !from.starts_with(to))
                .collect();
            edges.insert(from.clone(), to);
        }
        edges
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn walk(src: &Path, dir: &Path, skip: &[&str], modules: &mut BTreeMap<ModPath, String>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let rel = path.strip_prefix(src).expect("under src");
        let rel_str = rel.to_string_lossy().replace('\\', "/");
        if skip.iter().any(|s| rel_str == *s) {
            continue;
        }
        if path.is_dir() {
            walk(src, &path, skip, modules);
            continue;
        }
        if path.extension().is_some_and(|e| e != "rs")
            || path.extension().is_none()
            || dir == src && is_root(&path)
        {
            continue;
        }
        let mut module: ModPath = rel
            .with_extension("")
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if module.last().is_some_and(|l| l == "mod") {
            module.pop();
        }
        modules.insert(module, non_test_code(&read(&path)));
    }
}

fn is_root(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n == "lib.rs" || n == "main.rs")
}

/// The code with every `#[cfg(test)]` item left out (a test module, a
/// test-only helper or `use`).
fn non_test_code(code: &str) -> String {
    let mut out = String::new();
    let mut lines = code.lines();
    while let Some(line) = lines.next() {
        if line.trim() != "#[cfg(test)]" {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let mut depth = 0i32;
        let mut opened = false;
        for item in lines.by_ref() {
            for c in item.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            let done = if opened {
                depth <= 0
            } else {
                item.trim_end().ends_with(';')
            };
            if done {
                break;
            }
        }
    }
    out
}

/// Every path in `code` that starts with `crate`, `super` or a crate name:
/// `use` trees expanded, and paths written inline.
fn paths_in(code: &str) -> Vec<Vec<String>> {
    let code = strip_comments(code);
    let mut out = use_paths(&code);
    for word in code.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')) {
        if word.starts_with("crate::") || word.starts_with("super::") {
            out.push(word.split("::").map(str::to_string).collect());
        }
    }
    out
}

/// Every path the `use` trees of `code` (its comments stripped) import,
/// each tree expanded.
fn use_paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = find_use(rest) {
        let after = &rest[at..];
        let end = after.find(';').unwrap_or(after.len());
        let tree = after[..end]
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        expand(&tree, &mut Vec::new(), &mut out);
        rest = &after[end..];
    }
    out
}

/// The start of the next `use` tree (just past `use `), at a word boundary.
fn find_use(code: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = code[from..].find("use ") {
        let at = from + i;
        let before = code[..at].chars().next_back();
        if !before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            return Some(at + 4);
        }
        from = at + 4;
    }
    None
}

/// Expands `a::{b, c::{d, e}}` into `a::b`, `a::c::d`, `a::c::e`.
fn expand(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    let tree = tree.strip_prefix("::").unwrap_or(tree);
    if let Some(open) = tree.find('{') {
        let head: Vec<String> = tree[..open]
            .split("::")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        let inner = tree[open + 1..].trim_end();
        let inner = inner.strip_suffix('}').unwrap_or(inner);
        let depth = prefix.len();
        prefix.extend(head);
        for part in split_top(inner) {
            expand(part, prefix, out);
        }
        prefix.truncate(depth);
        return;
    }
    let mut path = prefix.clone();
    let tree = tree.split(" as ").next().unwrap_or(tree);
    path.extend(
        tree.split("::")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string),
    );
    out.push(path);
}

/// Splits on the commas of the outermost brace level.
fn split_top(inner: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts.into_iter().filter(|p| !p.is_empty()).collect()
}

/// The code without `//` comments (doc comments name modules in links,
/// which is not an import) and without string literals' contents.
fn strip_comments(code: &str) -> String {
    let mut out = String::new();
    for line in code.lines() {
        let mut in_str = false;
        let mut prev = ' ';
        let mut kept = String::new();
        for (i, c) in line.char_indices() {
            if !in_str && c == '/' && line[i..].starts_with("//") {
                break;
            }
            if c == '"' && prev != '\\' {
                in_str = !in_str;
            } else if !in_str {
                kept.push(c);
            }
            prev = c;
        }
        out.push_str(&kept);
        out.push('\n');
    }
    out
}

/// `path` as written in module `from`, made absolute within the crate;
/// `None` for paths into other crates or `self`.
fn absolute(from: &ModPath, path: &[String]) -> Option<ModPath> {
    let first = path.first()?;
    if first == "crate" {
        return Some(path[1..].to_vec());
    }
    if first != "super" {
        return None;
    }
    let mut base = from.clone();
    let mut rest = path;
    while rest.first().is_some_and(|s| s == "super") {
        base.pop()?;
        rest = &rest[1..];
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// Every cycle of the graph, as the modules of each strongly connected
/// component with more than one module (Tarjan's algorithm).
fn cycles(edges: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<ModPath, BTreeSet<ModPath>>,
        index: BTreeMap<&'a ModPath, usize>,
        low: BTreeMap<&'a ModPath, usize>,
        stack: Vec<&'a ModPath>,
        on_stack: BTreeSet<&'a ModPath>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a ModPath) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        let edges = s.edges;
        for w in edges.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.join("::"));
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.found
}

/// The edges among `component`'s modules, as `"  from -> to"` lines: what
/// to cut to end the cycle.
fn edges_within(edges: &BTreeMap<ModPath, BTreeSet<ModPath>>, component: &[String]) -> Vec<String> {
    let mut lines = Vec::new();
    for (from, tos) in edges {
        let from = from.join("::");
        if !component.contains(&from) {
            continue;
        }
        for to in tos {
            let to = to.join("::");
            if component.contains(&to) {
                lines.push(format!("  {from} -> {to}"));
            }
        }
    }
    lines
}

/// What a layer's `mod.rs` says it may import: the `crate::LAYER` and
/// `agy_corpus` links of its "May import:" paragraph.
fn may_import(mod_rs: &str) -> (BTreeSet<String>, bool) {
    let paragraph: String = mod_rs
        .lines()
        .skip_while(|l| !l.contains("May import:"))
        .take_while(|l| l.trim() != "//!")
        .collect::<Vec<_>>()
        .join(" ");
    assert!(!paragraph.is_empty(), "no \"May import:\" in:\n{mod_rs}");
    let layers = paragraph
        .split("crate::")
        .skip(1)
        .filter_map(|s| s.split(|c: char| !(c.is_alphanumeric() || c == '_')).next())
        .map(str::to_string)
        .collect();
    (layers, paragraph.contains("agy_corpus"))
}

/// Each layer's imports that its `mod.rs` does not allow, as
/// `"from -> to"` lines.
fn layer_violations(tree: &Tree, src: &Path) -> Vec<String> {
    let layers: BTreeSet<String> = tree
        .modules
        .keys()
        .filter(|m| m.len() == 1 && src.join(&m[0]).is_dir())
        .map(|m| m[0].clone())
        .collect();
    let mut bad = Vec::new();
    for layer in &layers {
        let (allowed, corpus_ok) = may_import(&read(&src.join(layer).join("mod.rs")));
        for (module, code) in tree.modules.range(vec![layer.clone()]..) {
            if module.first() != Some(layer) {
                break;
            }
            for to in tree.names(module) {
                let target = &to[0];
                if target != layer && layers.contains(target) && !allowed.contains(target) {
                    bad.push(format!("{} -> {}", module.join("::"), to.join("::")));
                }
            }
            if !corpus_ok && strip_comments(code).contains("agy_corpus::") {
                bad.push(format!("{} -> agy_corpus", module.join("::")));
            }
        }
    }
    bad
}

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The library's layers import only what their `mod.rs` allows.
#[test]
fn each_layer_imports_only_what_its_mod_rs_allows() {
    let src = workspace().join("src");
    let lib = Tree::read(&src, "lib.rs", &["main.rs", "cli"]);
    assert!(lib.modules.len() > 50, "{} modules", lib.modules.len());
    let bad = layer_violations(&lib, &src);
    assert!(
        bad.is_empty(),
        "imports a layer may not make:\n{}",
        bad.join("\n")
    );
}

/// No module of any crate of the workspace is in an import cycle.
#[test]
fn no_import_cycles_in_any_crate() {
    let root = workspace();
    let src = root.join("src");
    let trees = [
        (
            "agy-bridge lib",
            Tree::read(&src, "lib.rs", &["main.rs", "cli"]),
        ),
        ("agy-bridge bin", {
            let mut t = Tree::read(&src, "main.rs", &[]);
            t.modules
                .retain(|m, _| m.first().is_none_or(|f| f == "cli"));
            t
        }),
        (
            "agy-format",
            Tree::read(&root.join("crates/format/src"), "lib.rs", &[]),
        ),
        (
            "agy-corpus",
            Tree::read(&root.join("crates/corpus/src"), "lib.rs", &[]),
        ),
        (
            "agy-synth",
            Tree::read(&root.join("crates/synth/src"), "lib.rs", &[]),
        ),
        (
            "fake-agy",
            Tree::read(&root.join("fake-agy/src"), "main.rs", &[]),
        ),
    ];
    let mut found = Vec::new();
    for (name, tree) in &trees {
        let edges = tree.edges();
        let count: usize = edges.values().map(BTreeSet::len).sum();
        assert!(count > 0, "{name}: no edges read: the parser is broken");
        for cycle in cycles(&edges) {
            found.push(format!("{name}: {}", cycle.join(" <-> ")));
            found.extend(edges_within(&edges, &cycle));
        }
    }
    assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
}

/// The parser sees the imports this crate is known to make, so the two
/// checks above are not passing on an empty graph.
#[test]
fn the_parser_reads_known_edges() {
    let src = workspace().join("src");
    let lib = Tree::read(&src, "lib.rs", &["main.rs", "cli"]);
    let edges = lib.edges();
    let has = |from: &str, to: &str| {
        let from: ModPath = from.split("::").map(str::to_string).collect();
        let to: ModPath = to.split("::").map(str::to_string).collect();
        edges.get(&from).is_some_and(|e| e.contains(&to))
    };
    // A `use crate::…`, a `super::` path and a path written inline.
    assert!(has("runner", "follow::poller"), "{:#?}", edges.keys());
    assert!(has("pi::models::catalog", "pi::models::listed"));
    assert!(has("maintain::record", "view::decode"));
}

/// A made-up crate with a cycle (`a` ↔ `b`, one of them through a grouped
/// `use`), a layer import its `mod.rs` forbids, and test code that would
/// otherwise add a third edge: the checks find exactly those.
#[test]
fn the_checks_fail_on_a_cycle_and_a_forbidden_import() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path();
    let write = |rel: &str, text: &str| {
        let path = src.join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    };
    write("lib.rs", "pub mod low;\npub mod high;\n");
    write(
        "low/mod.rs",
        "//! May import: nothing.\n//!\npub mod a;\npub mod b;\n",
    );
    write(
        "low/a.rs",
        "use crate::{high::x::Y, low::b};\npub fn f() { b::g(); }\n",
    );
    write(
        "low/b.rs",
        "pub fn g() { super::a::f(); }\n#[cfg(test)]\nmod tests {\n    use crate::high::z;\n}\n",
    );
    write(
        "high/mod.rs",
        "//! May import: [`crate::low`].\n//!\npub mod x;\npub mod z;\n",
    );
    write("high/x.rs", "pub struct Y;\n");
    write("high/z.rs", "pub struct Z;\n");
    let tree = Tree::read(src, "lib.rs", &[]);
    assert_eq!(
        cycles(&tree.edges()),
        vec![vec!["low::a".to_string(), "low::b".to_string()]]
    );
    assert_eq!(layer_violations(&tree, src), vec!["low::a -> high::x"]);
}

/// The most `unsafe` blocks `src/` may hold, its test code included.
const MAX_UNSAFE_BLOCKS: usize = 8;

/// An `unsafe` block (or `unsafe impl`) in some code: its line (from 1),
/// and whether a `// SAFETY:` comment says why right before it.
#[derive(Debug, PartialEq)]
struct UnsafeSite {
    line: usize,
    explained: bool,
}

/// The `unsafe` blocks of `code`, outside comments and string literals. An
/// `unsafe fn` is a contract, not a block: with `unsafe_op_in_unsafe_fn`
/// denied, the unsafe calls in its body are blocks of their own.
fn unsafe_sites(code: &str) -> Vec<UnsafeSite> {
    let raw: Vec<&str> = code.lines().collect();
    let stripped = strip_comments(code);
    let mut sites = Vec::new();
    for (i, line) in stripped.lines().enumerate() {
        let mut first_on_line = true;
        let mut from = 0;
        while let Some(at) = line[from..].find("unsafe").map(|at| from + at) {
            from = at + "unsafe".len();
            let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
            if word(line[..at].chars().next_back()) || word(line[from..].chars().next()) {
                continue;
            }
            let next = line[from..].split_whitespace().next().or_else(|| {
                stripped
                    .lines()
                    .skip(i + 1)
                    .find_map(|l| l.split_whitespace().next())
            });
            if next.is_some_and(|w| w == "fn" || w.starts_with("fn(")) {
                continue;
            }
            sites.push(UnsafeSite {
                line: i + 1,
                explained: first_on_line && safety_comment_above(&raw[..i]),
            });
            first_on_line = false;
        }
    }
    sites
}

/// Whether the lines before an `unsafe` end, going up within its statement
/// (past attributes and the statement's own earlier lines), in a comment
/// that holds `SAFETY:`.
fn safety_comment_above(before: &[&str]) -> bool {
    let mut in_comment = false;
    for line in before.iter().rev().map(|l| l.trim()) {
        if line.starts_with("//") {
            if line.contains("SAFETY:") {
                return true;
            }
            in_comment = true;
            continue;
        }
        let ends_statement = !line.starts_with("#[") && line.ends_with([';', '{', '}', ',']);
        if in_comment || line.is_empty() || ends_statement {
            return false;
        }
        // An attribute, or an earlier line of the same statement
        // (`let x =`): on up.
    }
    false
}

/// What is wrong with the `unsafe` blocks of `files` (path, code): each
/// one without its reason, and too many of them.
fn unsafe_problems(files: &[(String, String)]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut count = 0;
    let mut all = Vec::new();
    for (path, code) in files {
        for site in unsafe_sites(code) {
            count += 1;
            all.push(format!("  {path}:{}", site.line));
            if !site.explained {
                problems.push(format!(
                    "{path}:{}: an unsafe block without a `// SAFETY:` comment right before it",
                    site.line
                ));
            }
        }
    }
    if count > MAX_UNSAFE_BLOCKS {
        problems.push(format!(
            "{count} unsafe blocks, at most {MAX_UNSAFE_BLOCKS}: one small documented helper per mechanism\n{}",
            all.join("\n")
        ));
    }
    problems
}

/// Every `.rs` file under `dir`, as (path relative to `base`, code).
fn rust_files(base: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(base, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(base).expect("under base");
            out.push((rel.display().to_string(), read(&path)));
        }
    }
}

/// Whether `code` opens (before its first item: past doc comments,
/// comments and other inner attributes) with the inner attribute `attr`.
fn opens_with(code: &str, attr: &str) -> bool {
    for line in code.lines().map(str::trim) {
        if line == attr {
            return true;
        }
        if !(line.is_empty() || line.starts_with("//") || line.starts_with("#![")) {
            return false;
        }
    }
    false
}

/// The crate roots of the workspace's other crates (`crates/*` and
/// fake-agy): libraries, binaries, tests, benches and examples.
fn other_crate_roots(root: &Path) -> Vec<PathBuf> {
    let mut packages: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .expect("crates/")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    packages.push(root.join("fake-agy"));
    let mut roots = Vec::new();
    for package in packages {
        for file in ["src/lib.rs", "src/main.rs"] {
            roots.push(package.join(file));
        }
        for dir in ["src/bin", "tests", "benches", "examples"] {
            if let Ok(entries) = std::fs::read_dir(package.join(dir)) {
                roots.extend(entries.map(|e| e.expect("directory entry").path()));
            }
        }
    }
    roots.retain(|p| p.is_file() && p.extension().is_some_and(|e| e == "rs"));
    roots.sort();
    roots
}

/// `unsafe` in `src/` is rare and explained: at most
/// [`MAX_UNSAFE_BLOCKS`] blocks (test code included), each right after a
/// `// SAFETY:` comment, and no `unsafe fn` body without blocks of its
/// own. The workspace's other crates forbid `unsafe` outright.
#[test]
fn unsafe_is_rare_explained_and_forbidden_outside_src() {
    let root = workspace();
    let mut files = Vec::new();
    rust_files(&root, &root.join("src"), &mut files);
    assert!(files.len() > 50, "{} files in src/", files.len());
    let mut problems = unsafe_problems(&files);
    for file in ["src/lib.rs", "src/main.rs"] {
        if !opens_with(&read(&root.join(file)), "#![deny(unsafe_op_in_unsafe_fn)]") {
            problems.push(format!(
                "{file}: no #![deny(unsafe_op_in_unsafe_fn)] at the top"
            ));
        }
    }
    let roots = other_crate_roots(&root);
    for crate_lib in ["crates/format", "crates/corpus", "crates/synth"] {
        let lib = root.join(crate_lib).join("src/lib.rs");
        assert!(roots.contains(&lib), "{} not read", lib.display());
    }
    assert!(roots.contains(&root.join("fake-agy/src/main.rs")));
    for path in roots {
        if !opens_with(&read(&path), "#![forbid(unsafe_code)]") {
            let rel = path.strip_prefix(&root).expect("under the workspace");
            problems.push(format!(
                "{}: no #![forbid(unsafe_code)] at the top",
                rel.display()
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Made-up code: the blocks explained right before them pass; one whose
/// comment comes after it, a second block on a line, one past a blank
/// line, and one more than the limit, fail. Comments, strings,
/// `unsafe_code` and an `unsafe fn` are no blocks.
#[test]
fn the_unsafe_checks_fail_on_an_unexplained_block_and_on_too_many() {
    let code = r#"// SAFETY: explained.
let a = unsafe { f() };
let b =
    // SAFETY: explained, inside the statement.
    unsafe { g() };
#[cfg(unix)]
// SAFETY: explained, under an attribute.
unsafe { h() }
let c = unsafe { i() }; // SAFETY: after it does not count
// SAFETY: the fork explained, not the child's block.
match unsafe { fork() } { Child => unsafe { j() } }
// unsafe in a comment; #![forbid(unsafe_code)]
let s = "unsafe { }";
/// # Safety
///
/// One thread.
pub unsafe fn k() {}
// SAFETY: a blank line apart.

unsafe { l() }
"#;
    let sites: Vec<(usize, bool)> = unsafe_sites(code)
        .iter()
        .map(|s| (s.line, s.explained))
        .collect();
    assert_eq!(
        sites,
        [
            (2, true),
            (5, true),
            (8, true),
            (9, false),
            (11, true),
            (11, false),
            (20, false)
        ]
    );
    let one = |code: &str| vec![("a.rs".to_string(), code.to_string())];
    assert_eq!(
        unsafe_problems(&one(code)),
        [
            "a.rs:9: an unsafe block without a `// SAFETY:` comment right before it",
            "a.rs:11: an unsafe block without a `// SAFETY:` comment right before it",
            "a.rs:20: an unsafe block without a `// SAFETY:` comment right before it",
        ]
    );
    let explained = "// SAFETY: why.\nunsafe { f() }\n".repeat(MAX_UNSAFE_BLOCKS);
    assert!(unsafe_problems(&one(&explained)).is_empty());
    let too_many = explained + "// SAFETY: why.\nunsafe { f() }\n";
    let problems = unsafe_problems(&one(&too_many));
    assert_eq!(problems.len(), 1);
    assert!(
        problems[0].starts_with("9 unsafe blocks, at most 8"),
        "{problems:?}"
    );

    let forbid = "#![forbid(unsafe_code)]";
    assert!(opens_with(
        "//! Docs.\n\n#![allow(dead_code)]\n#![forbid(unsafe_code)]\n\nmod a;\n",
        forbid
    ));
    assert!(!opens_with(
        "//! Docs.\n\nmod a;\n#![forbid(unsafe_code)]\n",
        forbid
    ));
    assert!(!opens_with(
        "//! Docs.\n#![deny(unsafe_code)]\nmod a;\n",
        forbid
    ));
}

/// The functions of `std::env` that read or change the process
/// environment.
const ENV_FUNCTIONS: [&str; 6] = ["var", "var_os", "vars", "vars_os", "set_var", "remove_var"];

/// Where `code` reads or changes the process environment: a call written
/// as a path ending in `env::FUNCTION`, or such a function imported by a
/// `use` tree. Comments and string literals do not count.
fn env_reads(code: &str) -> Vec<String> {
    let stripped = strip_comments(code);
    let mut found = Vec::new();
    for word in stripped.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')) {
        let parts: Vec<&str> = word.split("::").collect();
        if let [.., "env", name] = parts.as_slice() {
            if ENV_FUNCTIONS.contains(name) {
                found.push(word.to_string());
            }
        }
    }
    for path in use_paths(&stripped) {
        if let [first, env, name] = path.as_slice() {
            if first == "std" && env == "env" && ENV_FUNCTIONS.contains(&name.as_str()) {
                found.push(path.join("::"));
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

/// Every file under `src` outside the settings module, `main.rs` and the
/// binary's `cli/` that reads or changes the environment, as
/// `"file: what"` lines.
fn env_readers(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("directory entry").path();
            let rel = path
                .strip_prefix(src)
                .expect("under src")
                .to_string_lossy()
                .replace('\\', "/");
            if ["settings", "cli", "main.rs"].contains(&rel.as_str()) {
                continue;
            }
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push((rel, path));
            }
        }
    }
    files.sort();
    let mut bad = Vec::new();
    for (rel, path) in files {
        for what in env_reads(&read(&path)) {
            bad.push(format!("{rel}: {what}"));
        }
    }
    bad
}

/// Only the settings module reads the environment: the library takes what
/// it needs from `agy_bridge::settings::Settings`, which the binary's
/// `main` resolves once and passes down.
#[test]
fn only_the_settings_module_reads_the_environment() {
    let src = workspace().join("src");
    let bad = env_readers(&src);
    assert!(
        bad.is_empty(),
        "the environment read outside src/settings (take it from Settings):\n{}",
        bad.join("\n")
    );
    // The settings module itself is seen by the same reader.
    let settings = read(&src.join("settings/env.rs"));
    assert_eq!(env_reads(&settings), ["std::env::vars_os"]);
}

/// Made-up code reading the environment every way the check knows, beside
/// comments and strings that only mention it: each read is found, the
/// mentions are not, and a file outside `settings/` and `cli/` is named.
#[test]
fn the_environment_check_fails_on_made_up_reads() {
    let code = r#"
use std::env::{self, set_var};
use std::env::var_os as get;
// std::env::var("IN_A_COMMENT")
fn f() {
    let _ = "std::env::remove_var(\"IN_A_STRING\")";
    let _ = std::env::var("A");
    let _ = env::vars();
    set_var("B", "1");
    std::env::remove_var("C");
    let _ = std::env::args();
}
"#;
    assert_eq!(
        env_reads(code),
        [
            "env::vars",
            "std::env::remove_var",
            "std::env::set_var",
            "std::env::var",
            "std::env::var_os",
        ]
    );
    assert!(env_reads("fn g() { let _ = std::env::current_dir(); }").is_empty());

    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path();
    for (rel, text) in [
        ("lib.rs", "pub mod low;\n"),
        (
            "low/mod.rs",
            "pub fn home() { std::env::var_os(\"HOME\"); }\n",
        ),
        ("settings/mod.rs", "pub fn all() { std::env::vars_os(); }\n"),
        ("cli/run.rs", "fn f() { std::env::var(\"X\"); }\n"),
        ("main.rs", "fn main() { std::env::set_var(\"Y\", \"\"); }\n"),
    ] {
        let path = src.join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    assert_eq!(env_readers(src), ["low/mod.rs: std::env::var_os"]);
}

/// Every `.rs` file name under `dir` but `mod.rs`, with how many files
/// bear it.
fn file_name_counts(dir: &Path, counts: &mut BTreeMap<String, usize>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            file_name_counts(&path, counts);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            if let Some(name) = name.filter(|n| n != "mod.rs") {
                *counts.entry(name).or_default() += 1;
            }
        }
    }
}

/// The names that more than one file of `counts` bears.
fn repeated(counts: &BTreeMap<String, usize>) -> Vec<&str> {
    counts
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(name, _)| name.as_str())
        .collect()
}

/// A file's name says which concept it holds: at most 4 names are borne
/// by more than one file of `src/` (a command's file in `cli/` and the
/// library module it drives, say), so a name found in a path tells the
/// layer apart only where it must.
#[test]
fn few_file_names_repeat_across_src() {
    let mut counts = BTreeMap::new();
    file_name_counts(&workspace().join("src"), &mut counts);
    assert!(counts.len() > 50, "read too few files: {counts:?}");
    let names = repeated(&counts);
    assert!(
        names.len() <= 4,
        "file names repeated across src/: {names:?}"
    );
}

/// The counting sees a repeat and ignores `mod.rs`.
#[test]
fn the_repeat_check_counts_names_not_folders() {
    let dir = tempfile::tempdir().expect("tempdir");
    for rel in ["a/x.rs", "b/x.rs", "a/mod.rs", "b/mod.rs", "c.rs"] {
        let path = dir.path().join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
        std::fs::write(path, "").expect("write");
    }
    let mut counts = BTreeMap::new();
    file_name_counts(dir.path(), &mut counts);
    assert_eq!(repeated(&counts), ["x.rs"]);
}
