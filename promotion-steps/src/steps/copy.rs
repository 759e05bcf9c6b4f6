//! `copy`: copies a file or a whole directory within the work directory, e.g. rendered
//! manifests from a scratch directory into the Stage branch's checkout.
//!
//! Symbolic links are copied as links and never followed, so a link in a repository
//! cannot pull in a file from outside the work directory; a link already at the
//! destination is replaced, never written through.

use std::io::ErrorKind;
use std::path::Path;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Map;

use super::files::{on_blocking_pool, resolve};
use super::typed::TypedStep;
use crate::{StepContext, StepOutcome, Writes};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "copy";

/// Configuration of `copy`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Config {
    /// The file or directory to copy, relative to the work directory.
    in_path: String,
    /// Where to copy it. A file goes to this path, or into it when it ends with `/` or is an
    /// existing directory; a directory's content is merged into this directory (files that
    /// exist only here are kept).
    out_path: String,
}

/// The `copy` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct CopyFiles;

#[async_trait]
impl TypedStep for CopyFiles {
    const KIND: &'static str = KIND;
    const WRITES: Writes = Writes::Nothing;
    type Config = Config;

    async fn run_config(&self, ctx: &StepContext, config: Config) -> StepOutcome {
        let ctx = ctx.clone();
        on_blocking_pool(KIND, move || run(&ctx, config)).await
    }
}

fn run(ctx: &StepContext, config: Config) -> Result<StepOutcome, StepOutcome> {
    let from = resolve(ctx, &config.in_path, true)?;
    let to = resolve(ctx, &config.out_path, true)?;
    let meta = std::fs::metadata(&from).map_err(|e| match e.kind() {
        ErrorKind::NotFound => StepOutcome::failed(format!(
            "`{}` does not exist in the work directory; check `inPath`",
            config.in_path
        )),
        _ => StepOutcome::errored(format!("cannot read `{}`: {e}", config.in_path)),
    })?;
    let copied = if meta.is_dir() {
        let (real_from, real_to) = (from.canonicalize(), to.canonicalize());
        if to.starts_with(&from)
            || matches!((&real_from, &real_to), (Ok(f), Ok(t)) if t.starts_with(f))
        {
            return Err(StepOutcome::failed(format!(
                "cannot copy `{}` into `{}`, which is inside it",
                config.in_path, config.out_path
            )));
        }
        copy_dir(&from, &to)?
    } else {
        let to = if config.out_path.ends_with('/') || to.is_dir() {
            match from.file_name() {
                Some(name) => to.join(name),
                None => to,
            }
        } else {
            to
        };
        if let Some(parent) = to.parent() {
            make_dir(parent)?;
        }
        usize::from(copy_file(&from, &to)?)
    };
    ctx.log(&format!(
        "copied `{}` to `{}` ({} changed)",
        config.in_path,
        config.out_path,
        crate::count::count(copied, "file")
    ));
    Ok(StepOutcome::succeeded(Map::new()))
}

/// Copies the content of `from` into `to`; returns how many files changed.
fn copy_dir(from: &Path, to: &Path) -> Result<usize, StepOutcome> {
    make_dir(to)?;
    let entries = std::fs::read_dir(from)
        .map_err(|e| StepOutcome::errored(format!("cannot list `{}`: {e}", from.display())))?;
    let mut changed = 0;
    for entry in entries {
        let entry = entry
            .map_err(|e| StepOutcome::errored(format!("cannot list `{}`: {e}", from.display())))?;
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().map_err(|e| {
            StepOutcome::errored(format!("cannot read `{}`: {e}", source.display()))
        })?;
        if kind.is_symlink() {
            changed += usize::from(copy_link(&source, &target)?);
        } else if kind.is_dir() {
            changed += copy_dir(&source, &target)?;
        } else if kind.is_file() {
            changed += usize::from(copy_file(&source, &target)?);
        }
    }
    Ok(changed)
}

/// Makes `dir` a real directory: a link or file in its place is replaced.
fn make_dir(dir: &Path) -> Result<(), StepOutcome> {
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.is_dir() => return Ok(()),
        Ok(_) => remove(dir)?,
        Err(_) => {}
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| StepOutcome::errored(format!("cannot create `{}`: {e}", dir.display())))
}

/// Copies one file unless `to` already holds the same bytes; returns whether it wrote.
fn copy_file(from: &Path, to: &Path) -> Result<bool, StepOutcome> {
    let bytes = std::fs::read(from)
        .map_err(|e| StepOutcome::errored(format!("cannot read `{}`: {e}", from.display())))?;
    match std::fs::symlink_metadata(to) {
        Ok(meta) if meta.is_file() => {
            if std::fs::read(to).is_ok_and(|old| old == bytes) {
                return Ok(false);
            }
        }
        Ok(_) => remove(to)?,
        Err(_) => {}
    }
    std::fs::write(to, bytes)
        .map_err(|e| StepOutcome::errored(format!("cannot write `{}`: {e}", to.display())))?;
    Ok(true)
}

/// Recreates the link `from` at `to`, pointing where it points; returns whether it changed.
fn copy_link(from: &Path, to: &Path) -> Result<bool, StepOutcome> {
    let target = std::fs::read_link(from)
        .map_err(|e| StepOutcome::errored(format!("cannot read link `{}`: {e}", from.display())))?;
    if std::fs::read_link(to).is_ok_and(|old| old == target) {
        return Ok(false);
    }
    if std::fs::symlink_metadata(to).is_ok() {
        remove(to)?;
    }
    std::os::unix::fs::symlink(&target, to)
        .map_err(|e| StepOutcome::errored(format!("cannot create link `{}`: {e}", to.display())))?;
    Ok(true)
}

/// Removes a file, link or directory tree (never what a link points to).
fn remove(path: &Path) -> Result<(), StepOutcome> {
    let result = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path),
        _ => std::fs::remove_file(path),
    };
    result.map_err(|e| StepOutcome::errored(format!("cannot replace `{}`: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Step;
    use crate::testing::{context, failed, outputs};
    use serde_json::json;

    #[tokio::test]
    async fn a_directory_is_copied_recursively_and_merged() {
        let work = tempfile::tempdir().unwrap();
        let w = work.path();
        std::fs::create_dir_all(w.join("src/app/base")).unwrap();
        std::fs::write(w.join("src/app/kustomization.yaml"), "resources: [base]\n").unwrap();
        std::fs::write(w.join("src/app/base/deploy.yaml"), "kind: Deployment\n").unwrap();
        std::os::unix::fs::symlink("base/deploy.yaml", w.join("src/app/link.yaml")).unwrap();
        std::fs::create_dir_all(w.join("out/app")).unwrap();
        std::fs::write(w.join("out/app/keep.txt"), "kept\n").unwrap();
        std::fs::write(w.join("out/app/kustomization.yaml"), "old\n").unwrap();
        let ctx = context(w);
        let config = json!({"inPath": "src/app", "outPath": "out/app"});
        outputs(CopyFiles.run(&ctx, config.clone()).await);
        let read = |p: &str| std::fs::read_to_string(w.join(p)).unwrap();
        assert_eq!(read("out/app/kustomization.yaml"), "resources: [base]\n");
        assert_eq!(read("out/app/base/deploy.yaml"), "kind: Deployment\n");
        assert_eq!(read("out/app/keep.txt"), "kept\n");
        assert_eq!(
            std::fs::read_link(w.join("out/app/link.yaml")).unwrap(),
            Path::new("base/deploy.yaml")
        );
        outputs(CopyFiles.run(&ctx, config).await);
        assert_eq!(read("out/app/base/deploy.yaml"), "kind: Deployment\n");
    }

    #[tokio::test]
    async fn a_file_is_copied_to_a_path_or_into_a_directory() {
        let work = tempfile::tempdir().unwrap();
        let w = work.path();
        std::fs::write(w.join("values.yaml"), "a: 1\n").unwrap();
        let ctx = context(w);
        outputs(
            CopyFiles
                .run(
                    &ctx,
                    json!({"inPath": "values.yaml", "outPath": "env/prod.yaml"}),
                )
                .await,
        );
        outputs(
            CopyFiles
                .run(&ctx, json!({"inPath": "values.yaml", "outPath": "env/"}))
                .await,
        );
        assert_eq!(
            std::fs::read_to_string(w.join("env/prod.yaml")).unwrap(),
            "a: 1\n"
        );
        assert_eq!(
            std::fs::read_to_string(w.join("env/values.yaml")).unwrap(),
            "a: 1\n"
        );
    }

    #[tokio::test]
    async fn links_never_lead_outside_and_bad_paths_fail() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s3cret\n").unwrap();
        let work = tempfile::tempdir().unwrap();
        let w = work.path();
        std::os::unix::fs::symlink(outside.path().join("secret"), w.join("leak")).unwrap();
        std::fs::create_dir(w.join("dir")).unwrap();
        std::fs::write(w.join("dir/file"), "x\n").unwrap();
        // A link at the destination is replaced, not written through.
        std::fs::create_dir(w.join("out")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), w.join("out/file")).unwrap();
        let ctx = context(w);
        let reason = failed(
            CopyFiles
                .run(&ctx, json!({"inPath": "leak", "outPath": "copied"}))
                .await,
        );
        assert!(reason.contains("through a symbolic link"), "{reason}");
        outputs(
            CopyFiles
                .run(&ctx, json!({"inPath": "dir", "outPath": "out"}))
                .await,
        );
        assert_eq!(
            std::fs::read_to_string(outside.path().join("secret")).unwrap(),
            "s3cret\n"
        );
        assert_eq!(std::fs::read_to_string(w.join("out/file")).unwrap(), "x\n");

        let reason = failed(
            CopyFiles
                .run(&ctx, json!({"inPath": "dir", "outPath": "dir/sub"}))
                .await,
        );
        assert!(reason.contains("which is inside it"), "{reason}");
        let reason = failed(
            CopyFiles
                .run(&ctx, json!({"inPath": "nope", "outPath": "x"}))
                .await,
        );
        assert!(reason.contains("`nope` does not exist"), "{reason}");
        let reason = failed(
            CopyFiles
                .run(&ctx, json!({"inPath": "dir", "outPath": "/tmp/x"}))
                .await,
        );
        assert!(
            reason.contains("leaves the promotion's work directory"),
            "{reason}"
        );
    }
}
