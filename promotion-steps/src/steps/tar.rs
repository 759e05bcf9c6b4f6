//! `tar`: archives a file or a directory of the work directory into a tar file, gzipped by
//! default (Kargo's `tar`). A directory's entries sit under its own name (`app/…`), as
//! `tar -C parent -c app` writes them; `untar` with `stripComponents: 1` undoes that.
//! Archives are reproducible: entries sorted, times and owners zeroed, so the same tree
//! gives the same bytes. Symbolic links are archived as links, never followed.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use flate2::Compression;
use flate2::write::GzEncoder;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Map;

use super::archive::{Ignore, MAX_BYTES, MAX_ENTRIES, too_big};
use super::files::{on_blocking_pool, resolve};
use super::typed::TypedStep;
use crate::{StepContext, StepOutcome, Writes};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "tar";

/// Configuration of `tar`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Config {
    /// The file or directory to archive, relative to the work directory.
    in_path: String,
    /// The archive to write (replaced when it exists), relative to the work directory.
    out_path: String,
    /// `.gitignore`-style patterns, one per line, of paths to leave out (relative to
    /// `inPath`).
    #[serde(default)]
    ignore: Option<String>,
    /// Compress with gzip (default true).
    #[serde(default = "yes")]
    gzip: bool,
}

fn yes() -> bool {
    true
}

/// The `tar` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Tar;

#[async_trait]
impl TypedStep for Tar {
    const KIND: &'static str = KIND;
    const WRITES: Writes = Writes::Nothing;
    type Config = Config;

    async fn run_config(&self, ctx: &StepContext, config: Config) -> StepOutcome {
        let ctx = ctx.clone();
        on_blocking_pool(KIND, move || run(&ctx, &config)).await
    }
}

fn run(ctx: &StepContext, config: &Config) -> Result<StepOutcome, StepOutcome> {
    let source = resolve(ctx, &config.in_path, true)?;
    let out = resolve(ctx, &config.out_path, true)?;
    let ignore = Ignore::parse(KIND, config.ignore.as_deref())?;
    let meta = source.symlink_metadata().map_err(|_| {
        StepOutcome::failed(format!(
            "`{}` does not exist in the work directory; check `inPath`",
            config.in_path
        ))
    })?;
    if meta.is_dir() && out.starts_with(&source) {
        return Err(StepOutcome::failed(format!(
            "`outPath` `{}` is inside `inPath` `{}`: the archive would hold itself; write it \
             elsewhere",
            config.out_path, config.in_path
        )));
    }
    let name = source
        .file_name()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    let mut entries = Vec::new();
    if meta.is_dir() {
        collect(
            &source,
            Path::new(""),
            &ignore,
            &mut entries,
            &config.in_path,
        )?;
    }
    let errored = |e: std::io::Error| {
        StepOutcome::errored(format!(
            "cannot write the archive `{}`: {e}",
            config.out_path
        ))
    };
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent).map_err(errored)?;
    }
    let partial = out.with_extension("partial");
    let file = File::create(&partial).map_err(errored)?;
    let sink: Box<dyn Write> = if config.gzip {
        Box::new(GzEncoder::new(file, Compression::default()))
    } else {
        Box::new(file)
    };
    let mut builder = tar::Builder::new(sink);
    builder.mode(tar::HeaderMode::Deterministic);
    builder.follow_symlinks(false);
    let mut bytes = 0u64;
    let count = entries.len().max(1);
    if meta.is_dir() {
        builder.append_dir(&name, &source).map_err(errored)?;
        for relative in &entries {
            let path = source.join(relative);
            bytes += path.symlink_metadata().map(|m| m.len()).unwrap_or(0);
            if bytes > MAX_BYTES {
                let _ = std::fs::remove_file(&partial);
                return Err(too_big(KIND, &format!("`{}`", config.in_path)));
            }
            builder
                .append_path_with_name(&path, name.join(relative))
                .map_err(errored)?;
        }
    } else {
        builder
            .append_path_with_name(&source, &name)
            .map_err(errored)?;
    }
    let sink = builder.into_inner().map_err(errored)?;
    drop(sink);
    std::fs::rename(&partial, &out).map_err(errored)?;
    ctx.log(&format!(
        "archived `{}` ({count} entries) into `{}`",
        config.in_path, config.out_path
    ));
    Ok(StepOutcome::succeeded(Map::new()))
}

/// Every path under `dir` (relative to the archived directory), sorted, minus ignored ones.
fn collect(
    root: &Path,
    relative: &Path,
    ignore: &Ignore,
    into: &mut Vec<PathBuf>,
    shown: &str,
) -> Result<(), StepOutcome> {
    let dir = root.join(relative);
    let mut children = std::fs::read_dir(&dir)
        .and_then(|entries| {
            entries
                .map(|e| e.map(|e| e.file_name()))
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(|e| StepOutcome::errored(format!("cannot read `{}`: {e}", dir.display())))?;
    children.sort();
    for child in children {
        let path = relative.join(&child);
        let is_dir = root
            .join(&path)
            .symlink_metadata()
            .is_ok_and(|m| m.is_dir());
        if ignore.skips(&path, is_dir) {
            continue;
        }
        into.push(path.clone());
        if into.len() > MAX_ENTRIES {
            return Err(too_big(KIND, &format!("`{shown}`")));
        }
        if is_dir {
            collect(root, &path, ignore, into, shown)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Step;
    use crate::testing::{context, failed, outputs};
    use serde_json::json;

    fn listing(archive: &Path, gzip: bool) -> Vec<String> {
        let file = File::open(archive).unwrap();
        let reader: Box<dyn std::io::Read> = if gzip {
            Box::new(flate2::read::GzDecoder::new(file))
        } else {
            Box::new(file)
        };
        tar::Archive::new(reader)
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect()
    }

    #[tokio::test]
    async fn archives_a_tree_under_its_name_reproducibly_and_leaves_out_ignored_paths() {
        let work = tempfile::tempdir().unwrap();
        let w = work.path();
        std::fs::create_dir_all(w.join("app/templates")).unwrap();
        std::fs::create_dir_all(w.join("app/temp")).unwrap();
        std::fs::write(w.join("app/Chart.yaml"), "name: app\n").unwrap();
        std::fs::write(w.join("app/templates/cm.yaml"), "kind: ConfigMap\n").unwrap();
        std::fs::write(w.join("app/temp/junk"), "x").unwrap();
        std::fs::write(w.join("app/debug.log"), "x").unwrap();
        let ctx = context(w);
        let config =
            json!({"inPath": "app", "outPath": "dist/app.tgz", "ignore": "temp/\n*.log\n"});
        outputs(Tar.run(&ctx, config.clone()).await);
        assert_eq!(
            listing(&w.join("dist/app.tgz"), true),
            [
                "app",
                "app/Chart.yaml",
                "app/templates",
                "app/templates/cm.yaml"
            ]
        );
        let first = std::fs::read(w.join("dist/app.tgz")).unwrap();
        outputs(Tar.run(&ctx, config).await);
        assert_eq!(
            std::fs::read(w.join("dist/app.tgz")).unwrap(),
            first,
            "reproducible"
        );
        outputs(
            Tar.run(
                &ctx,
                json!({"inPath": "app/Chart.yaml", "outPath": "one.tar", "gzip": false}),
            )
            .await,
        );
        assert_eq!(listing(&w.join("one.tar"), false), ["Chart.yaml"]);
    }

    #[tokio::test]
    async fn refuses_missing_inputs_bad_patterns_and_archives_inside_themselves() {
        let work = tempfile::tempdir().unwrap();
        let w = work.path();
        std::fs::create_dir_all(w.join("app")).unwrap();
        let ctx = context(w);
        let reason = failed(
            Tar.run(&ctx, json!({"inPath": "nope", "outPath": "a.tgz"}))
                .await,
        );
        assert!(reason.contains("`nope` does not exist"), "{reason}");
        let reason = failed(
            Tar.run(&ctx, json!({"inPath": "app", "outPath": "app/a.tgz"}))
                .await,
        );
        assert!(reason.contains("would hold itself"), "{reason}");
        let reason = failed(
            Tar.run(
                &ctx,
                json!({"inPath": "app", "outPath": "a.tgz", "ignore": "[z-a]\n"}),
            )
            .await,
        );
        assert!(reason.contains("is not a .gitignore pattern"), "{reason}");
    }
}
