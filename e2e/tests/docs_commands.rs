//! The docs are tested: every `dray …` command line in a fenced code block (```` ```sh ````,
//! `bash`, `console`, `shell` or no language) of `README.md` and `docs/*.md` must parse with
//! the real binary's command line definition (`DRAY_PARSE_ONLY=1` makes `dray` exit once
//! its arguments parse), and the README's tour runs, in order, against a real `dray serve`
//! with the quickstart's services. A failure names the file, the line and the command, so
//! whoever changes a command knows which doc to fix.
//!
//! Extraction: `$ ` prompts are dropped, lines ending in `\` joined, `# …` comments cut
//! (a comment saying `exits N` sets the exit status the tour expects), leading `NAME=value`
//! assignments skipped, and the command ends at a pipe, `&&`, `;`, `&` or a redirection.
//! The command is the words after `dray` (or a path ending in `/dray`).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, Result, bail};
use dray_e2e::pipeline::{Pipeline, text};
use dray_e2e::{Dray, oci, workspace_root};

/// One documented `dray` command.
#[derive(Debug, Clone, PartialEq)]
struct DocCommand {
    /// `README.md` or `docs/NAME.md`.
    file: String,
    /// The line the command starts on (1-based).
    line: usize,
    /// The arguments after `dray`.
    args: Vec<String>,
    /// The exit status the docs give it (`# exits N`), else 0.
    exit: i32,
    /// The heading the code block is under.
    section: String,
    /// Which shell code block under that heading (0 for the first).
    block: usize,
}

impl DocCommand {
    fn shown(&self) -> String {
        format!(
            "{}:{}: `dray {}`",
            self.file,
            self.line,
            self.args.join(" ")
        )
    }
}

/// Fenced-code languages whose lines are shell commands.
const SHELL_FENCES: [&str; 6] = ["", "sh", "bash", "console", "shell", "shell-session"];

/// Every `dray` command in the shell code blocks of `markdown` (from `file`).
fn extract(file: &str, markdown: &str) -> Vec<DocCommand> {
    let mut found = Vec::new();
    let mut in_block: Option<bool> = None; // Some(is_shell) inside a fence
    let mut section = String::new();
    let mut blocks_in_section = 0;
    let mut pending: Option<(usize, String)> = None;
    for (i, raw) in markdown.lines().enumerate() {
        let trimmed = raw.trim();
        if let Some(fence) = trimmed.strip_prefix("```") {
            in_block = match in_block {
                None => Some(SHELL_FENCES.contains(&fence.trim())),
                Some(shell) => {
                    blocks_in_section += usize::from(shell);
                    None
                }
            };
            pending = None;
            continue;
        }
        match in_block {
            None => {
                if let Some(heading) = trimmed.strip_prefix('#') {
                    section = heading.trim_start_matches('#').trim().to_owned();
                    blocks_in_section = 0;
                }
                continue;
            }
            Some(false) => continue,
            Some(true) => {}
        }
        let (start, mut logical) = pending.take().unwrap_or((i + 1, String::new()));
        let body = trimmed.strip_prefix("$ ").unwrap_or(trimmed);
        if let Some(continued) = body.strip_suffix('\\') {
            logical.push_str(continued);
            logical.push(' ');
            pending = Some((start, logical));
            continue;
        }
        logical.push_str(body);
        if let Some(command) = parse_line(&logical) {
            found.push(DocCommand {
                file: file.to_owned(),
                line: start,
                args: command.0,
                exit: command.1,
                section: section.clone(),
                block: blocks_in_section,
            });
        }
    }
    found
}

/// The `dray` arguments of one shell line and the exit status its comment gives.
fn parse_line(line: &str) -> Option<(Vec<String>, i32)> {
    let (words, comment) = split_words(line);
    let exit = comment
        .as_deref()
        .and_then(|c| c.split("exits ").nth(1))
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let mut words = words.into_iter().skip_while(|w| is_assignment(w));
    let program = words.next()?;
    if program != "dray" && !program.ends_with("/dray") {
        return None;
    }
    let args = words
        .take_while(|w| {
            !["|", "||", "&&", ";", "&"].contains(&w.as_str())
                && !w.starts_with('>')
                && !w.starts_with('<')
                && !w.starts_with("2>")
        })
        .collect();
    Some((args, exit))
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// Shell words (quotes and backslashes as `sh` reads them) and the comment after `#`.
fn split_words(line: &str) -> (Vec<String>, Option<String>) {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '#' if word.is_none() => return (words, Some(chars.collect())),
            ' ' | '\t' => {
                if let Some(w) = word.take() {
                    words.push(w);
                }
            }
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    w.push(q);
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' => w.extend(chars.next()),
                        other => w.push(other),
                    }
                }
            }
            '\\' => word.get_or_insert_with(String::new).extend(chars.next()),
            other => word.get_or_insert_with(String::new).push(other),
        }
    }
    words.extend(word);
    (words, None)
}

/// Every documented command: `README.md`, then `docs/*.md` by name.
fn documented() -> Result<Vec<DocCommand>> {
    let root = workspace_root();
    let mut files = vec![PathBuf::from("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    docs.retain(|p| p.extension().is_some_and(|e| e == "md"));
    docs.sort();
    for doc in docs {
        files.push(doc.strip_prefix(&root)?.to_owned());
    }
    let mut all = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(root.join(&file))
            .with_context(|| format!("cannot read {}", file.display()))?;
        all.extend(extract(&file.display().to_string(), &text));
    }
    Ok(all)
}

/// Runs the real binary on `args` with `DRAY_PARSE_ONLY=1`: `Ok` when they parse.
fn parses(args: &[String]) -> Result<std::result::Result<(), String>> {
    let output = Command::new(Dray::binary())
        .args(args)
        .env("DRAY_PARSE_ONLY", "1")
        .env("NO_COLOR", "1")
        .env_remove("DRAY_SERVER")
        .env_remove("DRAY_TOKEN")
        .env_remove("DRAY_PROJECT")
        .current_dir(workspace_root())
        .output()
        .context("cannot run dray")?;
    if output.status.success() {
        return Ok(Ok(()));
    }
    let said = String::from_utf8_lossy(&output.stderr);
    Ok(Err(said.lines().take(4).collect::<Vec<_>>().join(" / ")))
}

#[test]
fn the_extractor_finds_prompts_continuations_and_comments() {
    let markdown = "# Title\n\
        ```sh\n\
        $ dray get stages -p demo   # every Stage\n\
        target/debug/dray promote --stage dev \\\n  --alias 'a b' --wait | tee out\n\
        DRAY_TOKEN=x dray token list\n\
        dray approve --stage prod   # exits 1 when not allowed\n\
        cargo build\n\
        ```\n\
        ```bash\n\
        dray version\n\
        ```\n\
        ```yaml\n\
        dray: not a command\n\
        ```\n\
        Prose with dray get stages is not a command.\n";
    let found = extract("T.md", markdown);
    let lines: Vec<(usize, Vec<&str>, i32)> = found
        .iter()
        .map(|c| (c.line, c.args.iter().map(String::as_str).collect(), c.exit))
        .collect();
    assert_eq!(
        lines,
        [
            (3, vec!["get", "stages", "-p", "demo"], 0),
            (
                4,
                vec!["promote", "--stage", "dev", "--alias", "a b", "--wait"],
                0
            ),
            (6, vec!["token", "list"], 0),
            (7, vec!["approve", "--stage", "prod"], 1),
            (11, vec!["version"], 0),
        ]
    );
    assert!(found.iter().all(|c| c.section == "Title"));
    let blocks: Vec<usize> = found.iter().map(|c| c.block).collect();
    assert_eq!(blocks, [0, 0, 0, 0, 1]);
}

#[test]
fn every_documented_command_parses_with_the_real_binary() -> Result<()> {
    // The check can fail: a flag that does not exist is refused.
    let bogus = parses(&["get".into(), "stages".into(), "--no-such-flag".into()])?;
    assert!(bogus.is_err(), "an unknown flag parsed");

    let commands = documented()?;
    let in_readme = commands.iter().filter(|c| c.file == "README.md").count();
    assert!(
        in_readme >= 8,
        "found only {in_readme} commands in README.md: {commands:#?}"
    );
    let mut failures = Vec::new();
    for command in &commands {
        if let Err(said) = parses(&command.args)? {
            failures.push(format!("{}\n    {said}", command.shown()));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} documented commands do not parse; fix the docs (or the CLI):\n{}",
        failures.len(),
        commands.len(),
        failures.join("\n")
    );
    Ok(())
}

/// Tour commands not run, and why.
const NOT_RUN: &[(&str, &str)] = &[(
    "serve",
    "the test's own `dray serve` (with the quickstart's registry and git server) is the server the tour talks to",
)];

/// The quickstart project pointed at `p`'s registry and config repository.
fn localised_quickstart(p: &Pipeline) -> Result<PathBuf> {
    let source = workspace_root().join("examples/quickstart/project");
    let target = p.world.unique_dir("project")?;
    std::fs::create_dir_all(&target)?;
    for entry in std::fs::read_dir(&source)? {
        let path = entry?.path();
        let text = p.localise(&std::fs::read_to_string(&path)?);
        std::fs::write(target.join(path.file_name().context("file name")?), text)?;
    }
    Ok(target)
}

/// `args` with the tour's paths and names replaced by this world's: the project
/// directory, the Freight alias (whatever follows `--alias`) and `--out` directories.
fn substitute(p: &Pipeline, args: &[String], project: &Path) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut previous = "";
    for arg in args {
        let replaced = match (previous, arg.as_str()) {
            ("--alias", _) => p.newest_alias()?,
            ("--out", dir) => p.world.path().join(dir).display().to_string(),
            (_, "examples/quickstart/project") => project.display().to_string(),
            (_, other) => other.to_owned(),
        };
        previous = arg.as_str();
        out.push(replaced);
    }
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_tour_runs_against_a_real_server() -> Result<()> {
    let tour: Vec<DocCommand> = documented()?
        .into_iter()
        .filter(|c| c.file == "README.md" && c.section == "A tour" && c.block == 0)
        .collect();
    if tour.len() < 5 {
        bail!(
            "found only {} commands under README.md's `## A tour`: {tour:#?}",
            tour.len()
        );
    }
    let p = tokio::task::block_in_place(Pipeline::start)?;
    // What the quickstart does before its tour: an image in the registry.
    oci::push_image(&p.registry, "demo/app", "1.0.0").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        let project = localised_quickstart(&p)?;
        let mut failures = Vec::new();
        for command in &tour {
            let first = command.args.first().map(String::as_str).unwrap_or_default();
            if NOT_RUN.iter().any(|(name, _)| *name == first) {
                continue;
            }
            let args = substitute(&p, &command.args, &project)?;
            let output = p.dray.cli(&args)?;
            let code = output.status.code().unwrap_or(-1);
            if code != command.exit {
                failures.push(format!(
                    "{} (run as `dray {}`): exit {code}, the docs expect {}\n{}",
                    command.shown(),
                    args.join(" "),
                    command.exit,
                    text(&output)
                ));
            }
        }
        if !failures.is_empty() {
            bail!(
                "the README's tour does not run as documented:\n{}",
                failures.join("\n")
            );
        }
        Ok(())
    })
}
