//! `git-commit`: commits everything changed in a worktree, with Dray's audit trailers, so
//! that a stage branch's history is the audit log (`Dray-Freight`, `Dray-Promotion`, …).
//!
//! It refuses to commit a rendered `kind: Secret` carrying `data` or `stringData` unless
//! told to (`allowSecrets`). Nothing changed → Skipped. Idempotent: when HEAD already is
//! a commit with this promotion's `Dray-Promotion` trailer and nothing changed since (a
//! re-run after a crash between commit and push), it succeeds with that commit instead of
//! committing twice.
//!
//! The commit is made with plumbing (`write-tree`, `commit-tree`, `update-ref --no-deref`)
//! so that HEAD stays detached and no branch is created in the shared mirror.

use std::collections::BTreeMap;
use std::path::Path;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::typed::TypedStep;
use crate::git::{DEFAULT_EMAIL, DEFAULT_NAME, Git, GitError, Signing, read_record};
use crate::{StepContext, StepOutcome, Writes};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "git-commit";

/// The trailers Dray writes itself; `trailers` may not set them.
const RESERVED_TRAILERS: [&str; 9] = [
    "Dray-Freight",
    "Dray-Promotion",
    "Dray-Stage",
    "Dray-Actor",
    "Dray-Approved-By",
    "Dray-Signed-Off-By",
    "Dray-Image",
    "Dray-Config-Commit",
    "Dray-Override",
];

/// The configuration of `git-commit`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Config {
    /// The worktree, relative to the work directory (as given to `git-clone`).
    pub(crate) path: String,
    /// The commit message; Dray's trailers are appended after a blank line.
    pub(crate) message: String,
    /// The author (and committer); `Dray <dray@localhost>` when not given.
    #[serde(default)]
    pub(crate) author: Option<Author>,
    /// Commit a rendered `kind: Secret` that carries `data` or `stringData`.
    #[serde(default)]
    pub(crate) allow_secrets: bool,
    /// Extra trailers, e.g. `Dray-Window-Override: holiday by ann`.
    #[serde(default)]
    pub(crate) trailers: BTreeMap<String, String>,
}

/// A commit author.
#[derive(Deserialize, JsonSchema, Debug, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Author {
    /// The name; `Dray` when not given.
    #[serde(default)]
    pub(crate) name: Option<String>,
    /// The e-mail; `dray@localhost` when not given.
    #[serde(default)]
    pub(crate) email: Option<String>,
}

/// The `git-commit` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct GitCommit;

#[async_trait]
impl TypedStep for GitCommit {
    const KIND: &'static str = KIND;
    const WRITES: Writes = Writes::Nothing;
    type Config = Config;

    async fn run_config(&self, ctx: &StepContext, config: Config) -> StepOutcome {
        let (name, email) = match validate(&config) {
            Ok(author) => author,
            Err(reason) => {
                return StepOutcome::failed(format!("invalid `{KIND}` config: {reason}"));
            }
        };
        let dir = match ctx.path(&config.path) {
            Ok(dir) => dir,
            Err(reason) => return StepOutcome::failed(reason),
        };
        if tokio::fs::symlink_metadata(dir.join(".git")).await.is_err() {
            return StepOutcome::failed(format!(
                "`{}` is not a git worktree; hint: check it out with `git-clone` first",
                config.path
            ));
        }
        let message = full_message(ctx, &config);
        match commit(ctx, &config, &dir, &message, (&name, &email)).await {
            Ok(outcome) => outcome,
            Err(e) => StepOutcome::errored(format!("cannot commit in `{}`: {e}", config.path)),
        }
    }
}

/// Checks the config; returns the author's name and e-mail.
fn validate(config: &Config) -> Result<(String, String), String> {
    if config.message.trim().is_empty() {
        return Err("`message` is empty".into());
    }
    for (key, value) in &config.trailers {
        let token = !key.is_empty()
            && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !key.starts_with('-');
        if !token {
            return Err(format!(
                "trailer key `{key}` must be letters, digits and `-`"
            ));
        }
        if RESERVED_TRAILERS
            .iter()
            .any(|r| r.eq_ignore_ascii_case(key))
        {
            return Err(format!("trailer `{key}` is written by Dray itself"));
        }
        if value.contains('\n') {
            return Err(format!("trailer `{key}` must be a single line"));
        }
    }
    let author = config.author.as_ref();
    let name = author
        .and_then(|a| a.name.clone())
        .unwrap_or_else(|| DEFAULT_NAME.into());
    let email = author
        .and_then(|a| a.email.clone())
        .unwrap_or_else(|| DEFAULT_EMAIL.into());
    let bad = |s: &str| s.trim().is_empty() || s.contains(['<', '>', '\n']);
    if bad(&name) || bad(&email) {
        return Err(format!(
            "author `{name} <{email}>` is not a valid git identity"
        ));
    }
    Ok((name, email))
}

/// The message with Dray's trailers appended after a blank line.
fn full_message(ctx: &StepContext, config: &Config) -> String {
    let one_line = |s: &str| s.replace(['\r', '\n'], " ");
    let f = &ctx.freight;
    let mut trailers = Vec::new();
    trailers.push(match f.alias.is_empty() {
        true => format!("Dray-Freight: {}", f.id),
        false => format!("Dray-Freight: {} ({})", f.id, f.alias),
    });
    trailers.push(format!("Dray-Promotion: {}", ctx.promotion));
    trailers.push(format!("Dray-Stage: {}/{}", ctx.project, ctx.stage));
    trailers.push(format!("Dray-Actor: {}", ctx.actor));
    if let Some(who) = &ctx.approved_by {
        trailers.push(format!("Dray-Approved-By: {who}"));
    }
    for who in &ctx.signed_off_by {
        trailers.push(format!("Dray-Signed-Off-By: {who}"));
    }
    if let Some(window_override) = &ctx.window_override {
        trailers.push(format!("Dray-Window-Override: {window_override}"));
    }
    if let Some(freeze_override) = &ctx.freeze_override {
        trailers.push(format!("Dray-Override: {}", one_line(freeze_override)));
    }
    for image in &f.images {
        let digest = match image.digest.is_empty() {
            true => String::new(),
            false => format!("@{}", image.digest),
        };
        trailers.push(format!(
            "Dray-Image: {}:{}{digest}",
            image.repo_url, image.tag
        ));
    }
    for commit in &f.commits {
        trailers.push(format!(
            "Dray-Config-Commit: {}@{}",
            commit.repo_url, commit.id
        ));
    }
    for (key, value) in &config.trailers {
        trailers.push(format!("{key}: {value}"));
    }
    let trailers: Vec<String> = trailers.iter().map(|t| one_line(t)).collect();
    format!("{}\n\n{}\n", config.message.trim_end(), trailers.join("\n"))
}

async fn commit(
    ctx: &StepContext,
    config: &Config,
    dir: &Path,
    message: &str,
    (name, email): (&str, &str),
) -> Result<StepOutcome, GitError> {
    let git = Git::local(ctx);
    git.run(dir, &["add", "-A"]).await?;
    let head = git.resolve(dir, "HEAD").await?;
    let changed = git
        .run(
            dir,
            &[
                "diff",
                "--cached",
                "--name-only",
                "-z",
                "--no-renames",
                "--diff-filter=d",
            ],
        )
        .await?;
    let changed: Vec<&str> = changed.split('\0').filter(|p| !p.is_empty()).collect();
    let staged = !git
        .output(dir, &["diff", "--cached", "--quiet"], None)
        .await?
        .status
        .success();
    if !staged {
        // A re-run after a crash between commit and push: HEAD is this promotion's commit.
        if let Some(head) = &head
            && git.promotion_trailer(dir, head).await?.as_deref() == Some(&ctx.promotion)
        {
            let head_message = git
                .run(dir, &["log", "-1", "--format=%B", head, "--"])
                .await?;
            ctx.log(&format!(
                "`{}` already holds this promotion's commit {head}",
                config.path
            ));
            return Ok(succeeded(head, &head_message));
        }
        return Ok(StepOutcome::skipped(format!(
            "nothing changed in `{}`",
            config.path
        )));
    }
    if !config.allow_secrets {
        for file in &changed {
            if !(file.ends_with(".yaml") || file.ends_with(".yml")) {
                continue;
            }
            let Ok(text) = tokio::fs::read_to_string(dir.join(file)).await else {
                continue;
            };
            if let Some(secret) = find_secret(&text) {
                return Ok(StepOutcome::failed(format!(
                    "refusing to commit `{}/{file}`: it holds Secret `{secret}` with `data` or \
                     `stringData` in plain text; hint: use a SealedSecret or an ExternalSecret, \
                     or set `allowSecrets: true` to commit it anyway",
                    config.path.trim_end_matches('/')
                )));
            }
        }
    }
    let tree = git.run(dir, &["write-tree"]).await?;
    let signing = match read_record(&git, dir).await {
        Ok(Some(record)) => Signing::for_worktree(ctx, &git, dir, &record.repo_url).await?,
        _ => None,
    };
    let sign_args = signing
        .as_ref()
        .map(Signing::config_args)
        .unwrap_or_default();
    let mut args: Vec<&str> = sign_args.iter().map(String::as_str).collect();
    args.push("commit-tree");
    if signing.is_some() {
        args.push("-S");
    }
    args.push(tree.trim());
    if let Some(head) = &head {
        args.extend(["-p", head.as_str()]);
    }
    args.extend(["-F", "-"]);
    let env = [
        ("GIT_AUTHOR_NAME", name),
        ("GIT_AUTHOR_EMAIL", email),
        ("GIT_COMMITTER_NAME", name),
        ("GIT_COMMITTER_EMAIL", email),
    ];
    let output = git.output_env(dir, &args, Some(message), &env).await?;
    if !output.status.success() {
        return Err(Signing::explain(
            signing.as_ref(),
            git.failure(&args, &output),
        ));
    }
    let sha = String::from_utf8_lossy(&output.stdout).trim().to_string();
    // Detach HEAD at the new commit (an orphan's unborn branch is never created).
    let mut update = vec![
        "update-ref",
        "--no-deref",
        "-m",
        "dray: git-commit",
        "HEAD",
        sha.as_str(),
    ];
    if let Some(head) = &head {
        update.push(head.as_str());
    }
    git.run(dir, &update).await?;
    ctx.log(&format!(
        "committed {sha} in `{}` ({}){}",
        config.path,
        files_changed(changed.len()),
        if signing.is_some() {
            ", signed with the project's signing key"
        } else {
            ""
        }
    ));
    Ok(succeeded(&sha, message))
}

/// `1 file changed`, `3 files changed`.
fn files_changed(count: usize) -> String {
    format!("{} changed", crate::count::count(count, "file"))
}

fn succeeded(sha: &str, message: &str) -> StepOutcome {
    let mut outputs = Map::new();
    outputs.insert("commit".into(), Value::String(sha.to_string()));
    outputs.insert("message".into(), Value::String(message.to_string()));
    StepOutcome::succeeded(outputs)
}

/// The name of the first `kind: Secret` in a (multi-document) YAML text that carries
/// `data` or `stringData` (inside `kind: List` items too).
fn find_secret(text: &str) -> Option<String> {
    use serde::Deserialize as _;
    let mut found = None;
    for doc in serde_yaml_ng::Deserializer::from_str(text) {
        match serde_yaml_ng::Value::deserialize(doc) {
            Ok(value) => found = found.or_else(|| secret_in(&value)),
            // Not YAML we can read: fall back to looking at the text, erring on refusal.
            Err(_) => return found.or_else(|| textual_secret(text)),
        }
    }
    found
}

fn secret_in(value: &serde_yaml_ng::Value) -> Option<String> {
    let get = |v: &serde_yaml_ng::Value, k: &str| v.get(k).cloned();
    if let Some(items) = get(value, "items").as_ref().and_then(|v| v.as_sequence()) {
        if let Some(name) = items.iter().find_map(secret_in) {
            return Some(name);
        }
    }
    if value.get("kind").and_then(|k| k.as_str()) != Some("Secret") {
        return None;
    }
    let carries = |k: &str| match value.get(k) {
        Some(serde_yaml_ng::Value::Mapping(m)) => !m.is_empty(),
        Some(serde_yaml_ng::Value::Null) | None => false,
        Some(_) => true,
    };
    if !(carries("data") || carries("stringData")) {
        return None;
    }
    let name = value
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(|n| n.as_str());
    Some(name.unwrap_or("<unnamed>").to_string())
}

fn textual_secret(text: &str) -> Option<String> {
    let is_secret = text.lines().any(|l| {
        matches!(
            l.trim_end(),
            "kind: Secret" | "kind: \"Secret\"" | "kind: 'Secret'"
        )
    });
    let has_data = text
        .lines()
        .any(|l| l.starts_with("data:") || l.starts_with("stringData:"));
    (is_secret && has_data).then(|| "<unparsed>".to_string())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::Step;
    use crate::steps::git_clone::GitClone;
    use crate::testing::{MirrorRepos, bare_remote, failed, git, git_context, outputs, push_files};

    #[test]
    fn counts_changed_files_in_english() {
        assert_eq!(files_changed(1), "1 file changed");
        assert_eq!(files_changed(0), "0 files changed");
        assert_eq!(files_changed(2), "2 files changed");
    }

    /// A work dir with `main` of a fresh repository checked out at `./out`.
    async fn checked_out() -> (tempfile::TempDir, StepContext, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let url = bare_remote(dir.path(), "config.git");
        push_files(&url, "main", &[("README", "hi\n")], "init");
        let work = dir.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        let ctx = git_context(&work, Arc::new(MirrorRepos::new()));
        let config = json!({"repoURL": url, "checkout": [{"branch": "main", "path": "./out"}]});
        outputs(GitClone.run(&ctx, config).await);
        (dir, ctx, work.join("out"))
    }

    #[tokio::test]
    async fn a_promotion_through_a_freeze_says_so_in_a_trailer() {
        let (_dir, mut ctx, out) = checked_out().await;
        ctx.freeze_override =
            Some("frozen by ann: incident 42 (Stage `staging`); overridden by bob: hotfix".into());
        std::fs::write(out.join("app.yaml"), "image: app:1.2.1\n").unwrap();
        let config = json!({"path": "./out", "message": "Promote tidy-otter to staging"});
        outputs(GitCommit.run(&ctx, config).await);
        let trailer = git(
            &out,
            &[
                "log",
                "-1",
                "--format=%(trailers:key=Dray-Override,valueonly)",
            ],
        );
        assert_eq!(
            trailer.trim(),
            "frozen by ann: incident 42 (Stage `staging`); overridden by bob: hotfix"
        );
        let config =
            json!({"path": "./out", "message": "m", "trailers": {"Dray-Override": "forged"}});
        let refused = GitCommit.run(&ctx, config).await;
        assert!(
            format!("{refused:?}").contains("Dray-Override"),
            "{refused:?}"
        );
    }

    #[tokio::test]
    async fn commits_with_every_trailer() {
        let (_dir, mut ctx, out) = checked_out().await;
        ctx.approved_by = Some("bob".into());
        ctx.signed_off_by = vec!["cy (looks good)".into(), "dee".into()];
        std::fs::write(out.join("app.yaml"), "image: app:1.2.0\n").unwrap();
        let config = json!({
            "path": "./out",
            "message": "Promote tidy-otter to staging\n",
            "author": {"name": "Ada", "email": "ada@example.com"},
            "trailers": {"Dray-Window-Override": "holiday by ann"},
        });
        let got = outputs(GitCommit.run(&ctx, config).await);
        let head = git(&out, &["rev-parse", "HEAD"]);
        assert_eq!(got["commit"], json!(head));
        let body = git(&out, &["log", "-1", "--format=%B"]);
        let want = format!(
            "Promote tidy-otter to staging\n\n\
             Dray-Freight: f0e1d2c3b4a5 (tidy-otter)\n\
             Dray-Promotion: staging-1\n\
             Dray-Stage: demo/staging\n\
             Dray-Actor: ada\n\
             Dray-Approved-By: bob\n\
             Dray-Signed-Off-By: cy (looks good)\n\
             Dray-Signed-Off-By: dee\n\
             Dray-Image: {}:{}@{}\n\
             Dray-Config-Commit: {}@{}\n\
             Dray-Window-Override: holiday by ann",
            crate::testing::IMAGE,
            crate::testing::TAG,
            crate::testing::DIGEST,
            crate::testing::REPO,
            crate::testing::COMMIT,
        );
        assert_eq!(body, want);
        assert_eq!(got["message"].as_str().unwrap().trim_end(), want);
        // git reads them as trailers.
        let parsed = git(
            &out,
            &["log", "-1", "--format=%(trailers:key=Dray-Stage,valueonly)"],
        );
        assert_eq!(parsed, "demo/staging");
        assert_eq!(
            git(&out, &["log", "-1", "--format=%an <%ae>|%cn <%ce>"]),
            "Ada <ada@example.com>|Ada <ada@example.com>"
        );
        // HEAD stays detached; the parent is the cloned commit.
        assert_eq!(git(&out, &["rev-parse", "--abbrev-ref", "HEAD"]), "HEAD");
        assert_eq!(git(&out, &["rev-list", "--count", "HEAD"]), "2");
    }

    #[tokio::test]
    async fn nothing_changed_is_skipped_and_a_rerun_reuses_the_commit() {
        let (_dir, ctx, out) = checked_out().await;
        let config = json!({"path": "out", "message": "promote"});
        let outcome = GitCommit.run(&ctx, config.clone()).await;
        assert_eq!(outcome, StepOutcome::skipped("nothing changed in `out`"));

        std::fs::write(out.join("x.yaml"), "x: 1\n").unwrap();
        let first = outputs(GitCommit.run(&ctx, config.clone()).await);
        assert!(git(&out, &["log", "-1", "--format=%an <%ae>"]).contains("Dray <dray@localhost>"));
        // A re-run after a crash between commit and push: same commit, no second one.
        let again = outputs(GitCommit.run(&ctx, config.clone()).await);
        assert_eq!(first["commit"], again["commit"]);
        assert_eq!(git(&out, &["rev-list", "--count", "HEAD"]), "2");
        // Another promotion with nothing to change is skipped, not "succeeded".
        let mut other = ctx.clone();
        other.promotion = "staging-2".into();
        assert!(matches!(
            GitCommit.run(&other, config).await,
            StepOutcome::Skipped { .. }
        ));
    }

    #[tokio::test]
    async fn an_orphan_commit_creates_no_branch_in_the_mirror() {
        let dir = tempfile::tempdir().unwrap();
        let url = bare_remote(dir.path(), "config.git");
        push_files(&url, "main", &[("README", "hi\n")], "init");
        let ctx = git_context(dir.path(), Arc::new(MirrorRepos::new()));
        let clone = json!({"repoURL": url, "checkout": [{"branch": "stage/dev", "create": true, "path": "out"}]});
        outputs(GitClone.run(&ctx, clone).await);
        let out = dir.path().join("out");
        std::fs::write(out.join("a.yaml"), "a: 1\n").unwrap();
        let got = outputs(
            GitCommit
                .run(&ctx, json!({"path": "out", "message": "first"}))
                .await,
        );
        assert_eq!(git(&out, &["rev-list", "--count", "HEAD"]), "1");
        assert_eq!(
            git(&out, &["rev-parse", "HEAD"]),
            got["commit"].as_str().unwrap()
        );
        let mirror = ctx.repos.fetch(&url, None).await.unwrap();
        assert_eq!(
            git(
                &mirror,
                &["for-each-ref", "--format=%(refname)", "refs/heads"]
            ),
            "refs/heads/main"
        );
    }

    #[tokio::test]
    async fn plaintext_secrets_are_refused_unless_allowed() {
        let (_dir, ctx, out) = checked_out().await;
        std::fs::create_dir_all(out.join("manifests")).unwrap();
        let docs = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {a: b}\n---\n\
                    apiVersion: v1\nkind: Secret\nmetadata:\n  name: db-password\nstringData:\n  password: hunter2\n";
        std::fs::write(out.join("manifests/all.yaml"), docs).unwrap();
        let reason = failed(
            GitCommit
                .run(&ctx, json!({"path": "out", "message": "m"}))
                .await,
        );
        assert!(reason.contains("`out/manifests/all.yaml`"), "{reason}");
        assert!(reason.contains("Secret `db-password`"), "{reason}");
        assert!(reason.contains("allowSecrets: true"), "{reason}");
        assert_eq!(git(&out, &["rev-list", "--count", "HEAD"]), "1");

        let config = json!({"path": "out", "message": "m", "allowSecrets": true});
        let got = outputs(GitCommit.run(&ctx, config).await);
        assert_eq!(
            git(&out, &["rev-parse", "HEAD"]),
            got["commit"].as_str().unwrap()
        );
    }

    #[test]
    fn secrets_are_found_in_lists_and_unparsable_yaml() {
        assert_eq!(
            find_secret("kind: Secret\nmetadata: {name: s}\ndata: {k: dg==}\n"),
            Some("s".into())
        );
        assert_eq!(
            find_secret("kind: Secret\nmetadata: {name: s}\ndata: {}\n"),
            None
        );
        assert_eq!(
            find_secret("kind: Secret\nmetadata: {name: s}\ntype: x\n"),
            None
        );
        assert_eq!(
            find_secret("kind: SealedSecret\nmetadata: {name: s}\nspec: {encryptedData: {k: v}}\n"),
            None
        );
        let list =
            "kind: List\nitems:\n- kind: Secret\n  metadata: {name: inner}\n  data: {k: dg==}\n";
        assert_eq!(find_secret(list), Some("inner".into()));
        let broken = "kind: Secret\ndata:\n  k: [unclosed\n";
        assert_eq!(find_secret(broken), Some("<unparsed>".into()));
    }

    #[tokio::test]
    async fn bad_configs_fail() {
        let work = tempfile::tempdir().unwrap();
        let ctx = crate::testing::context(work.path());
        let cases = [
            (
                json!({"path": "out", "message": "  "}),
                "`message` is empty",
            ),
            (
                json!({"path": "out", "message": "m", "trailers": {"Dray-Promotion": "x"}}),
                "written by Dray itself",
            ),
            (
                json!({"path": "out", "message": "m", "trailers": {"Bad Key": "x"}}),
                "trailer key",
            ),
            (
                json!({"path": "out", "message": "m", "author": {"name": "A <b>"}}),
                "not a valid git identity",
            ),
            (
                json!({"path": "out", "message": "m", "sign": true}),
                "unknown field `sign`",
            ),
            (json!({"path": "out", "message": "m"}), "not a git worktree"),
        ];
        for (config, want) in cases {
            let reason = failed(GitCommit.run(&ctx, config.clone()).await);
            assert!(reason.contains(want), "{config}: {reason}");
        }
    }
}
