//! `file-write`: writes given contents (often rendered by an expression) to a file in the
//! work directory, replacing it only when `overwrite` says so (Kargo's `file-write`).
//! Unlike `yaml-update` it replaces the whole file.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::files::{resolve, write_if_changed};
use super::typed::TypedStep;
use crate::{StepContext, StepOutcome, Writes};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "file-write";

/// Configuration of `file-write`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Config {
    /// The file to write, relative to the work directory; missing directories are made.
    path: String,
    /// What the file holds afterwards (may be empty).
    contents: String,
    /// Replace a file that exists (default false: an existing file fails the step).
    #[serde(default)]
    overwrite: bool,
}

/// The `file-write` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct FileWrite;

#[async_trait]
impl TypedStep for FileWrite {
    const KIND: &'static str = KIND;
    const WRITES: Writes = Writes::Nothing;
    type Config = Config;

    async fn run_config(&self, ctx: &StepContext, config: Config) -> StepOutcome {
        match run(ctx, &config) {
            Ok(outcome) | Err(outcome) => outcome,
        }
    }
}

fn run(ctx: &StepContext, config: &Config) -> Result<StepOutcome, StepOutcome> {
    let path = resolve(ctx, &config.path, true)?;
    if path.is_dir() {
        return Err(StepOutcome::failed(format!(
            "`{}` is a directory; name a file to write",
            config.path
        )));
    }
    let exists = path.symlink_metadata().is_ok();
    // A re-run after a crash finds the file it wrote: that is not a conflict.
    let already_written =
        exists && std::fs::read(&path).is_ok_and(|old| old == config.contents.as_bytes());
    if exists && !config.overwrite && !already_written {
        return Err(StepOutcome::failed(format!(
            "`{}` exists already; set `overwrite: true` to replace it",
            config.path
        )));
    }
    let wrote = write_if_changed(&path, &config.contents)?;
    ctx.log(&if wrote {
        format!("wrote `{}` ({} bytes)", config.path, config.contents.len())
    } else {
        format!("`{}` already held these contents", config.path)
    });
    let mut outputs = Map::new();
    outputs.insert(
        "commitMessage".to_owned(),
        Value::from(format!("write {}", config.path)),
    );
    Ok(StepOutcome::succeeded(outputs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Step;
    use crate::testing::{context, failed, outputs};
    use serde_json::json;

    #[tokio::test]
    async fn writes_new_files_and_replaces_only_when_told() {
        let work = tempfile::tempdir().unwrap();
        let w = work.path();
        let ctx = context(w);
        outputs(
            FileWrite
                .run(
                    &ctx,
                    json!({"path": "out/app/config.yaml", "contents": "a: 1\n"}),
                )
                .await,
        );
        assert_eq!(
            std::fs::read_to_string(w.join("out/app/config.yaml")).unwrap(),
            "a: 1\n"
        );
        // The same contents again (a resumed promotion) is fine, with the same outputs;
        // other contents are refused.
        let again = outputs(
            FileWrite
                .run(
                    &ctx,
                    json!({"path": "out/app/config.yaml", "contents": "a: 1\n"}),
                )
                .await,
        );
        assert_eq!(again["commitMessage"], "write out/app/config.yaml");
        let reason = failed(
            FileWrite
                .run(
                    &ctx,
                    json!({"path": "out/app/config.yaml", "contents": "a: 2\n"}),
                )
                .await,
        );
        assert!(reason.contains("set `overwrite: true`"), "{reason}");
        assert_eq!(
            std::fs::read_to_string(w.join("out/app/config.yaml")).unwrap(),
            "a: 1\n"
        );
        outputs(
            FileWrite
                .run(
                    &ctx,
                    json!({"path": "out/app/config.yaml", "contents": "", "overwrite": true}),
                )
                .await,
        );
        assert_eq!(
            std::fs::read_to_string(w.join("out/app/config.yaml")).unwrap(),
            ""
        );
    }

    #[tokio::test]
    async fn directories_and_escapes_are_refused() {
        let outside = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let w = work.path();
        std::fs::create_dir(w.join("dir")).unwrap();
        std::os::unix::fs::symlink(outside.path(), w.join("link")).unwrap();
        let ctx = context(w);
        let reason = failed(
            FileWrite
                .run(&ctx, json!({"path": "dir", "contents": "x"}))
                .await,
        );
        assert!(reason.contains("is a directory"), "{reason}");
        for path in ["link/evil", "../evil", "/tmp/evil"] {
            failed(
                FileWrite
                    .run(&ctx, json!({"path": path, "contents": "x"}))
                    .await,
            );
        }
        assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none());
    }
}
