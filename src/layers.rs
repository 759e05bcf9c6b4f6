//! The layers of the `dray` crate and the test that keeps them: a module may import only
//! modules of a lower layer (a lower rank in [`LAYERS`]); modules of the same rank are
//! siblings and import neither each other nor anything above. `docs/architecture.md`
//! ("Layers and import rules") shows the same table, and a test checks the two agree.
//!
//! | rank | modules | what they own |
//! |---|---|---|
//! | 0 | `api` | the resource model |
//! | 1 | `expr`, `secrets` | CEL inside `${{ }}`; sealing Credential secrets |
//! | 2 | `store` | persistence and the change feed |
//! | 3 | `runtime` | the controller runtime (feed, caches, reconcile) |
//! | 4 | `discovery` | registries, git mirrors, Credentials lookup, minting, webhook matching |
//! | 5 | `promotion`, `verification`, `notify` | running a promotion; verifying its outcome; telling others |
//! | 6 | `pipeline` | deciding what may run when |
//! | 7 | `config` | validating what clients write (asks the domain rules below it) |
//! | 8 | `server` | HTTP: authentication, routes mapping requests to the layers below |
//! | 9 | `ui` | the web UI, on top of `server` |
//! | 10 | `app` | the composition root: wires the controllers and the server |
//! | 11 | `cli`, `fuzzing` | the command line; fuzzing entry points |
//!
//! Within a layer, [`INNER_RULES`] forbid particular edges (a cycle broken once stays
//! broken). [`KNOWN_EXCEPTIONS`] lists imports that still run up, each with the work that
//! removes it; an exception no longer needed fails the test too, so the list only shrinks.
//!
//! The test reads every `src/**/*.rs` file (comments and string literals blanked), finds
//! each `crate::…`, `super::…` and `self::…` path (brace groups too), resolves it to the
//! module it names, and checks the top-level module of the file against the top-level
//! module named. Items of the crate root (`crate::VERSION`) are below every layer.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One top-level module and its rank: it may import modules of a lower rank only.
struct Layer {
    module: &'static str,
    rank: u8,
}

/// Every top-level module of the crate, by rank (see the module doc). A new top-level
/// module gets a row here and in `docs/architecture.md`, at the rank of the lowest layer
/// that needs it.
const LAYERS: &[Layer] = &[
    Layer {
        module: "api",
        rank: 0,
    },
    Layer {
        module: "secrets",
        rank: 1,
    },
    Layer {
        module: "expr",
        rank: 1,
    },
    Layer {
        module: "store",
        rank: 2,
    },
    Layer {
        module: "runtime",
        rank: 3,
    },
    Layer {
        module: "discovery",
        rank: 4,
    },
    Layer {
        module: "promotion",
        rank: 5,
    },
    Layer {
        module: "verification",
        rank: 5,
    },
    Layer {
        module: "notify",
        rank: 5,
    },
    Layer {
        module: "pipeline",
        rank: 6,
    },
    Layer {
        module: "config",
        rank: 7,
    },
    Layer {
        module: "server",
        rank: 8,
    },
    Layer {
        module: "ui",
        rank: 9,
    },
    Layer {
        module: "app",
        rank: 10,
    },
    Layer {
        module: "cli",
        rank: 11,
    },
    Layer {
        module: "fuzzing",
        rank: 11,
    },
];

/// Edges forbidden inside a layer: `(importer, imported, why)`, as module paths without
/// `crate::`; a path matches itself and everything under it.
const INNER_RULES: &[(&str, &str, &str)] = &[(
    "pipeline::request",
    "pipeline::auto",
    "auto-promotion requests promotions through `request`; `request` never calls back \
     (what both need lives in `pipeline::door` or `pipeline::availability`)",
)];

/// Imports that still run up a layer: `(file, imported top-level module, the work that
/// removes it)`. Remove a row when its import is gone (the test says so).
const KNOWN_EXCEPTIONS: &[(&str, &str, &str)] = &[
    (
        "src/server/test_support.rs",
        "ui",
        "test-only: route tests send requests to the whole app, the UI's router merged as \
         `app::serve` does; moves to `app` with the route tests",
    ),
    (
        "src/server/rbac_matrix.rs",
        "ui",
        "test-only: the RBAC matrix walks the UI's routes too; moves to `app` with the route \
         tests",
    ),
];

fn rank_of(module: &str) -> Option<u8> {
    LAYERS.iter().find(|l| l.module == module).map(|l| l.rank)
}

/// One path found in a file: where, as written, and the module path it resolves to.
#[derive(Debug)]
struct Import {
    line: usize,
    written: String,
    target: Vec<String>,
}

/// `text` with comments, string and char literals replaced by spaces (newlines kept), so
/// that positions and line numbers stay what they were.
fn blank_comments_and_strings(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let is_ident =
            |j: usize| j < chars.len() && (chars[j].is_alphanumeric() || chars[j] == '_');
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if c == 'r'
            && (i == 0 || !is_ident(i - 1) || (chars[i - 1] == 'b' && (i == 1 || !is_ident(i - 2))))
            && matches!(next, Some('"' | '#'))
        {
            // A raw string: r"…", r#"…"#, br#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= chars.len() {
                    break;
                }
                if chars[j] == '"' && (0..hashes).all(|h| chars.get(j + 1 + h) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.extend(chars[i..j.min(chars.len())].iter().map(|&c| blank(c)));
            i = j;
        } else if c == '"' {
            let mut j = i + 1;
            while j < chars.len() && chars[j] != '"' {
                j += if chars[j] == '\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(chars.len());
            out.extend(chars[i..end].iter().map(|&c| blank(c)));
            i = end;
        } else if c == '\'' {
            // A char literal ('x', '\n', '"'), or a lifetime ('a), which stays.
            let end = if next == Some('\\') {
                let mut j = i + 2;
                while j < chars.len() && chars[j] != '\'' {
                    j += 1;
                }
                Some(j + 1)
            } else if chars.get(i + 2) == Some(&'\'') {
                Some(i + 3)
            } else {
                None
            };
            match end {
                Some(end) => {
                    let end = end.min(chars.len());
                    out.extend(chars[i..end].iter().map(|&c| blank(c)));
                    i = end;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// The module path of the file at `relative` (from `src/`): `promotion/truth.rs` is
/// `promotion::truth`, `discovery/git/mod.rs` is `discovery::git`.
fn module_of(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if let Some(last) = parts.pop() {
        let stem = last.trim_end_matches(".rs");
        if stem != "mod" && stem != "lib" {
            parts.push(stem.to_owned());
        }
    }
    parts
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The identifier starting at byte `at` of `text`.
fn ident_at(text: &str, at: usize) -> &str {
    let rest = &text[at..];
    let end = rest.find(|c: char| !is_ident_char(c)).unwrap_or(rest.len());
    &rest[..end]
}

/// Every `crate::`, `super::` and `self::` path in `code` (already blanked), resolved
/// against `module` (the file's module path), with inline `mod name {` blocks followed by
/// their indentation (the code is rustfmt-formatted).
fn imports(code: &str, module: &[String]) -> Vec<Import> {
    let mut found = Vec::new();
    let mut inline: Vec<(usize, String)> = Vec::new();
    let mut line_start = 0;
    for (index, line) in code.split('\n').enumerate() {
        let indent = line.len() - line.trim_start().len();
        let trimmed = line.trim();
        if trimmed == "}" && inline.last().is_some_and(|(i, _)| *i == indent) {
            inline.pop();
        } else {
            let mut current: Vec<String> = module.to_vec();
            current.extend(inline.iter().map(|(_, name)| name.clone()));
            let text = &code[line_start..];
            paths_in_line(text, line.len(), &current, index + 1, &mut found);
            if let Some(name) = inline_mod(trimmed) {
                inline.push((indent, name));
            }
        }
        line_start += line.len() + 1;
    }
    found
}

/// The name of an inline module opened by `line` (`mod tests {`, `pub(crate) mod x {`).
fn inline_mod(line: &str) -> Option<String> {
    let rest = line.strip_suffix('{')?.trim_end();
    let rest = match rest.split_once("mod ") {
        Some((before, after))
            if before.is_empty()
                || before.trim_end() == "pub"
                || (before.starts_with("pub(") && before.trim_end().ends_with(')')) =>
        {
            after
        }
        _ => return None,
    };
    rest.chars()
        .all(is_ident_char)
        .then(|| rest.to_owned())
        .filter(|n| !n.is_empty())
}

/// The paths that start in the first `limit` bytes of `text` (one line; a brace group
/// may go on over the lines after it).
fn paths_in_line(
    text: &str,
    limit: usize,
    current: &[String],
    number: usize,
    found: &mut Vec<Import>,
) {
    let mut at = 0;
    while at < limit {
        let Some(offset) = text[at..limit].find(is_ident_char) else {
            break;
        };
        let start = at + offset;
        let word = ident_at(text, start);
        let preceded_by_path = text[..start].ends_with("::") || text[..start].ends_with('$');
        if !preceded_by_path
            && matches!(word, "crate" | "super" | "self")
            && text[start + word.len()..].starts_with("::")
        {
            let (end, heads) = path_at(text, start);
            let heads = if heads.is_empty() {
                vec![text[start..end].trim_end_matches("::").to_owned()]
            } else {
                heads
            };
            for head in heads {
                if let Some(target) = resolve(&head, current) {
                    found.push(Import {
                        line: number,
                        written: head,
                        target,
                    });
                }
            }
            at = end.max(start + word.len());
        } else {
            at = start + word.len().max(1);
        }
    }
}

/// The path starting at `start` (`crate::a::b`, `super::super::c`, `crate::{a, b::c}`):
/// where it ends, and for a brace group the path of each element (`crate::a`,
/// `crate::b::c`, nested groups down to their first segment); empty when there is none.
fn path_at(text: &str, start: usize) -> (usize, Vec<String>) {
    let mut end = start;
    loop {
        end += ident_at(text, end).len();
        if !text[end..].starts_with("::") {
            return (end, Vec::new());
        }
        let after = end + 2;
        if text[after..].starts_with('{') {
            let prefix = &text[start..end];
            let (close, elements) = brace_elements(&text[after..]);
            let heads = elements
                .into_iter()
                .map(|element| {
                    let segments: String = element
                        .chars()
                        .take_while(|&c| is_ident_char(c) || c == ':')
                        .collect();
                    format!("{prefix}::{}", segments.trim_end_matches(':'))
                })
                .collect();
            return (after + close, heads);
        }
        if !text[after..].starts_with(is_ident_char) {
            return (after, Vec::new());
        }
        end = after;
    }
}

/// The comma-separated elements of the brace group `group` opens (at depth 0), and the
/// length of the group.
fn brace_elements(group: &str) -> (usize, Vec<String>) {
    let mut depth = 0;
    let mut elements = Vec::new();
    let mut element = String::new();
    for (i, c) in group.char_indices() {
        match c {
            '{' => {
                depth += 1;
                if depth > 1 {
                    element.push(c);
                }
            }
            '}' => {
                depth -= 1;
                if depth == 0 {
                    elements.push(element.trim().to_owned());
                    let elements = elements.into_iter().filter(|e| !e.is_empty()).collect();
                    return (i + 1, elements);
                }
                element.push(c);
            }
            ',' if depth == 1 => elements.push(std::mem::take(&mut element).trim().to_owned()),
            c if c.is_whitespace() => {
                if !element.is_empty() && depth > 1 {
                    element.push(' ');
                }
            }
            c => element.push(c),
        }
    }
    (group.len(), elements)
}

/// The absolute module path `path` names from `current`; `None` when it climbs past the
/// crate root.
fn resolve(path: &str, current: &[String]) -> Option<Vec<String>> {
    let mut segments = path.split("::").filter(|s| !s.is_empty()).peekable();
    let mut resolved: Vec<String> = match segments.peek().copied() {
        Some("crate") => {
            segments.next();
            Vec::new()
        }
        _ => current.to_vec(),
    };
    for segment in segments {
        match segment {
            "super" => {
                resolved.pop()?;
            }
            "self" => {}
            other => resolved.push(other.to_owned()),
        }
    }
    Some(resolved)
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
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

fn crate_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One import that breaks a rule.
struct Violation {
    file: String,
    line: usize,
    written: String,
    rule: String,
}

/// Every import of the crate that breaks a rule, and the known exceptions used.
fn violations() -> (Vec<Violation>, BTreeSet<(String, String)>) {
    let src = crate_root().join("src");
    let mut broken = Vec::new();
    let mut excused = BTreeSet::new();
    for path in rust_files(&src) {
        let relative = path.strip_prefix(&src).unwrap();
        // The binary is its own crate: `crate::` there is not the library.
        if relative == Path::new("main.rs") {
            continue;
        }
        let file = format!("src/{}", relative.display());
        let module = module_of(relative);
        let Some(from_top) = module.first() else {
            continue; // lib.rs: the root declares the modules.
        };
        let code = blank_comments_and_strings(&std::fs::read_to_string(&path).unwrap());
        for import in imports(&code, &module) {
            if let Some(rule) = broken_rule(from_top, &module, &import) {
                let exception = KNOWN_EXCEPTIONS.iter().find(|(f, to, _)| {
                    *f == file && Some(*to) == import.target.first().map(String::as_str)
                });
                if let Some((f, to, _)) = exception {
                    excused.insert((f.to_string(), to.to_string()));
                    continue;
                }
                broken.push(Violation {
                    file: file.clone(),
                    line: import.line,
                    written: import.written,
                    rule,
                });
            }
        }
    }
    (broken, excused)
}

/// The rule `import` (in a file of `module`, under `from_top`) breaks, if any.
fn broken_rule(from_top: &str, module: &[String], import: &Import) -> Option<String> {
    let to_top = import.target.first()?;
    let joined = |path: &[String]| path.join("::");
    let within =
        |path: &str, prefix: &str| path == prefix || path.starts_with(&format!("{prefix}::"));
    for (importer, imported, why) in INNER_RULES {
        if within(&joined(module), importer) && within(&joined(&import.target), imported) {
            return Some(format!("`{importer}` must not import `{imported}`: {why}"));
        }
    }
    if to_top == from_top {
        return None;
    }
    let Some(to_rank) = rank_of(to_top) else {
        return None; // An item of the crate root (`crate::VERSION`), below every layer.
    };
    let from_rank = rank_of(from_top)?;
    (to_rank >= from_rank).then(|| {
        let may: Vec<&str> = LAYERS
            .iter()
            .filter(|l| l.rank < from_rank)
            .map(|l| l.module)
            .collect();
        let relation = if to_rank == from_rank { "its sibling" } else { "the layer above it," };
        format!(
            "`{from_top}` (rank {from_rank}) must not import {relation} `{to_top}` (rank {to_rank}); it may import: {}",
            if may.is_empty() { "nothing of the crate".to_owned() } else { may.join(", ") }
        )
    })
}

const HOW_TO_FIX: &str = "\
How to fix: move what both need down to a layer both may import (a pure type or function \
into `api`, a store write into `store`, a lookup into `discovery`), or pass it in from above. \
If the layer order itself should change, change LAYERS in src/layers.rs and the table in \
docs/architecture.md (\"Layers and import rules\") together, and say why in docs/decisions.md. \
A row in KNOWN_EXCEPTIONS (naming the work that removes it) is the last resort.";

#[test]
fn no_module_imports_a_layer_above_it() {
    let (broken, excused) = violations();
    let report: Vec<String> = broken
        .iter()
        .map(|v| format!("{}:{}: `{}`: {}", v.file, v.line, v.written, v.rule))
        .collect();
    assert!(
        report.is_empty(),
        "{} import(s) run up a layer:\n  {}\n\n{HOW_TO_FIX}",
        report.len(),
        report.join("\n  ")
    );
    let stale: Vec<String> = KNOWN_EXCEPTIONS
        .iter()
        .filter(|(file, to, _)| !excused.contains(&(file.to_string(), to.to_string())))
        .map(|(file, to, why)| format!("{file} → `{to}` ({why})"))
        .collect();
    assert!(
        stale.is_empty(),
        "these known exceptions are no longer needed; remove them from KNOWN_EXCEPTIONS in \
         src/layers.rs:\n  {}",
        stale.join("\n  ")
    );
}

#[test]
fn every_top_level_module_has_a_layer() {
    let lib = std::fs::read_to_string(crate_root().join("src/lib.rs")).unwrap();
    let code = blank_comments_and_strings(&lib);
    let declared: Vec<&str> = code
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            let rest = line
                .strip_prefix("pub mod ")
                .or_else(|| line.strip_prefix("mod "))?;
            rest.strip_suffix(';')
        })
        .filter(|name| *name != "layers")
        .collect();
    let missing: Vec<&&str> = declared.iter().filter(|m| rank_of(m).is_none()).collect();
    assert!(
        missing.is_empty(),
        "top-level module(s) {missing:?} have no layer: add a row to LAYERS in src/layers.rs \
         (at the rank of the lowest layer that imports it) and to the table in \
         docs/architecture.md (\"Layers and import rules\")"
    );
}

#[test]
fn the_architecture_doc_shows_the_same_layers() {
    let doc = std::fs::read_to_string(crate_root().join("docs/architecture.md")).unwrap();
    let section = doc
        .split("## Layers and import rules")
        .nth(1)
        .expect("docs/architecture.md has a section `## Layers and import rules`");
    let section = section.split("\n## ").next().unwrap_or_default();
    // Rows: `| 5 | `promotion`, `verification` | … |`.
    let mut documented: BTreeMap<String, u8> = BTreeMap::new();
    for row in section.lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
        let Some(rank) = cells.first().and_then(|c| c.parse::<u8>().ok()) else {
            continue;
        };
        for module in cells.get(1).unwrap_or(&"").split(',') {
            documented.insert(module.trim().trim_matches('`').to_owned(), rank);
        }
    }
    let coded: BTreeMap<String, u8> = LAYERS
        .iter()
        .map(|l| (l.module.to_owned(), l.rank))
        .collect();
    assert_eq!(
        documented, coded,
        "the table in docs/architecture.md (\"Layers and import rules\") and LAYERS in \
         src/layers.rs differ: change them together"
    );
}

#[test]
fn the_scanner_finds_what_runs_up_and_ignores_comments_and_strings() {
    let code = blank_comments_and_strings(
        "//! see [`crate::server`]\n\
         use crate::api::Kind;\n\
         use crate::{store::Store, server::refresh};\n\
         use super::super::ui::session;\n\
         let s = \"crate::server::x\"; let r = r#\"crate::ui\"#; let c = '\"';\n\
         /* crate::cli */ fn f<'a>(x: &'a str) { crate::server::y(x) }\n\
         mod tests {\n    use super::*;\n    use crate::pipeline::auto;\n}\n",
    );
    let module = vec!["promotion".to_owned(), "credentials".to_owned()];
    let found: Vec<(usize, String)> = imports(&code, &module)
        .into_iter()
        .map(|i| (i.line, i.target.join("::")))
        .collect();
    assert_eq!(
        found,
        [
            (2, "api::Kind".to_owned()),
            (3, "store::Store".to_owned()),
            (3, "server::refresh".to_owned()),
            (4, "ui::session".to_owned()),
            (6, "server::y".to_owned()),
            (8, "promotion::credentials".to_owned()),
            (9, "pipeline::auto".to_owned()),
        ]
    );
    let rules: Vec<Option<String>> = imports(&code, &module)
        .iter()
        .map(|i| broken_rule("promotion", &module, i))
        .collect();
    assert!(rules[0].is_none() && rules[1].is_none() && rules[5].is_none());
    let up = rules[2].as_deref().unwrap();
    assert!(
        up.contains("`promotion` (rank 5) must not import the layer above it, `server`"),
        "{up}"
    );
    assert!(rules[6].is_some(), "pipeline is above promotion");
}

#[test]
fn inner_rules_and_siblings_are_enforced() {
    let request = vec!["pipeline".to_owned(), "request".to_owned()];
    let import = |path: &str, line: usize| Import {
        line,
        written: path.to_owned(),
        target: resolve(path, &request).unwrap(),
    };
    let cycle = broken_rule(
        "pipeline",
        &request,
        &import("super::auto::AutoPromoter", 1),
    );
    assert!(
        cycle
            .unwrap()
            .contains("`pipeline::request` must not import `pipeline::auto`")
    );
    assert!(
        broken_rule(
            "pipeline",
            &request,
            &import("super::door::PromoteRequest", 2)
        )
        .is_none()
    );
    let verification = vec!["verification".to_owned(), "controller".to_owned()];
    let sibling = Import {
        line: 3,
        written: "crate::promotion::ProjectCredentials".to_owned(),
        target: resolve("crate::promotion::ProjectCredentials", &verification).unwrap(),
    };
    let rule = broken_rule("verification", &verification, &sibling).unwrap();
    assert!(rule.contains("its sibling `promotion`"), "{rule}");
}
