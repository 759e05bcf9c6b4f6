//! `delete`: removes a file or a directory tree from the work directory, e.g. stale
//! rendered manifests before `kustomize-build` writes fresh ones. Removing something that
//! is already gone succeeds, so a re-run is harmless.
//!
//! A symbolic link is removed as a link; what it points to is never touched.

use std::io::ErrorKind;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Map;

use super::files::{is_work_dir, on_blocking_pool, resolve};
use super::typed::TypedStep;
use crate::{StepContext, StepOutcome, Writes};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "delete";

/// Configuration of `delete`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Config {
    /// The file or directory to remove, relative to the work directory.
    path: String,
}

/// The `delete` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Delete;

#[async_trait]
impl TypedStep for Delete {
    const KIND: &'static str = KIND;
    const WRITES: Writes = Writes::Nothing;
    type Config = Config;

    async fn run_config(&self, ctx: &StepContext, config: Config) -> StepOutcome {
        let ctx = ctx.clone();
        on_blocking_pool(KIND, move || run(&ctx, config)).await
    }
}

fn run(ctx: &StepContext, config: Config) -> Result<StepOutcome, StepOutcome> {
    let path = resolve(ctx, &config.path, false)?;
    if is_work_dir(&config.path) {
        return Err(StepOutcome::failed(format!(
            "`delete` refuses to remove the whole work directory (`path` is `{}`); name what \
             to remove inside it",
            config.path
        )));
    }
    let removed = match std::fs::symlink_metadata(&path) {
        Err(e) if e.kind() == ErrorKind::NotFound => {
            ctx.log(&format!("`{}` is already absent", config.path));
            return Ok(StepOutcome::succeeded(Map::new()));
        }
        Err(e) => Err(e),
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(&path),
        Ok(_) => std::fs::remove_file(&path),
    };
    match removed {
        Ok(()) => {
            ctx.log(&format!("removed `{}`", config.path));
            Ok(StepOutcome::succeeded(Map::new()))
        }
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(StepOutcome::succeeded(Map::new())),
        Err(e) => Err(StepOutcome::errored(format!(
            "cannot remove `{}`: {e}",
            config.path
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Step;
    use crate::testing::{context, failed, outputs};
    use serde_json::json;

    #[tokio::test]
    async fn files_and_trees_go_and_absent_ones_are_fine() {
        let work = tempfile::tempdir().unwrap();
        let w = work.path();
        std::fs::create_dir_all(w.join("out/app/base")).unwrap();
        std::fs::write(w.join("out/app/base/deploy.yaml"), "kind: Deployment\n").unwrap();
        std::fs::write(w.join("out/keep.yaml"), "kept\n").unwrap();
        std::fs::write(w.join("old.yaml"), "old\n").unwrap();
        let ctx = context(w);
        outputs(Delete.run(&ctx, json!({"path": "out/app"})).await);
        outputs(Delete.run(&ctx, json!({"path": "old.yaml"})).await);
        assert!(!w.join("out/app").exists());
        assert!(!w.join("old.yaml").exists());
        assert!(w.join("out/keep.yaml").exists());
        // Idempotent.
        outputs(Delete.run(&ctx, json!({"path": "out/app"})).await);
    }

    #[tokio::test]
    async fn links_are_removed_not_followed_and_the_work_dir_is_kept() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("precious"), "keep me\n").unwrap();
        let work = tempfile::tempdir().unwrap();
        let w = work.path();
        std::os::unix::fs::symlink(outside.path(), w.join("link")).unwrap();
        let ctx = context(w);
        let reason = failed(Delete.run(&ctx, json!({"path": "link/precious"})).await);
        assert!(reason.contains("through a symbolic link"), "{reason}");
        outputs(Delete.run(&ctx, json!({"path": "link"})).await);
        assert!(w.join("link").symlink_metadata().is_err());
        assert!(outside.path().join("precious").exists());
        for root in [".", "", "./."] {
            let reason = failed(Delete.run(&ctx, json!({"path": root})).await);
            assert!(
                reason.contains("refuses to remove the whole work directory"),
                "{reason}"
            );
        }
        let reason = failed(Delete.run(&ctx, json!({"path": "../x"})).await);
        assert!(
            reason.contains("leaves the promotion's work directory"),
            "{reason}"
        );
    }
}
