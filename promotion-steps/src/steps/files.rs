//! File helpers shared by the rendering steps: resolving a configured path safely inside
//! the work directory, writing only what changed, splitting rendered manifests into one
//! file per resource, and running whole-tree file work off the async runtime
//! ([`on_blocking_pool`]).
//!
//! Not a step; nothing here runs tools or edits YAML (see `tool.rs` and `yaml_doc.rs`).

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::{StepContext, StepOutcome};

/// Runs `work` (file work on a whole tree: a copy, a removal) on tokio's blocking pool,
/// so that a large tree never stalls the async runtime's threads. A panic in `work` is an
/// `Errored` outcome naming the step.
pub(crate) async fn on_blocking_pool(
    kind: &str,
    work: impl FnOnce() -> Result<StepOutcome, StepOutcome> + Send + 'static,
) -> StepOutcome {
    match tokio::task::spawn_blocking(work).await {
        Ok(Ok(outcome) | Err(outcome)) => outcome,
        Err(error) => StepOutcome::errored(format!("`{kind}` stopped unexpectedly: {error}")),
    }
}

/// Resolves `relative` with [`StepContext::path`] (no `..`, not absolute), then also refuses
/// a path that leaves the work directory through a symbolic link in the work tree, e.g. a
/// cloned repository holding `link -> /etc`. With `follow_last` false the last component
/// may itself be a link (it is handled as a link, e.g. deleted, never followed).
pub(crate) fn resolve(
    ctx: &StepContext,
    relative: &str,
    follow_last: bool,
) -> Result<PathBuf, StepOutcome> {
    let path = ctx.path(relative).map_err(StepOutcome::failed)?;
    let root = ctx.work_dir.canonicalize().map_err(|e| {
        StepOutcome::errored(format!(
            "cannot open the work directory `{}`: {e}",
            ctx.work_dir.display()
        ))
    })?;
    // The work directory itself has no parent inside the work directory.
    let mut probe = if follow_last || is_work_dir(relative) {
        Some(path.as_path())
    } else {
        path.parent()
    };
    while let Some(candidate) = probe {
        match candidate.canonicalize() {
            Ok(real) if real.starts_with(&root) => return Ok(path),
            Ok(real) => {
                return Err(StepOutcome::failed(format!(
                    "path `{relative}` leads outside the promotion's work directory through a \
                     symbolic link (to `{}`); point the step at a path inside the work directory",
                    real.display()
                )));
            }
            Err(_) if candidate.symlink_metadata().is_ok() => {
                return Err(StepOutcome::failed(format!(
                    "path `{relative}` goes through the dangling symbolic link `{}`; remove it \
                     or point the step elsewhere",
                    candidate.display()
                )));
            }
            Err(_) => probe = candidate.parent(),
        }
    }
    Ok(path)
}

/// Whether `relative` names the work directory itself (``, `.`, `./.`).
pub(crate) fn is_work_dir(relative: &str) -> bool {
    Path::new(relative)
        .components()
        .all(|c| matches!(c, std::path::Component::CurDir))
}

/// Reads a text file, answering `Failed` (a configuration problem) when it is missing.
pub(crate) fn read_text(path: &Path, shown: &str) -> Result<String, StepOutcome> {
    std::fs::read_to_string(path).map_err(|e| match e.kind() {
        ErrorKind::NotFound => StepOutcome::failed(format!(
            "`{shown}` does not exist in the work directory; check the path (is the repository \
             cloned there by an earlier step?)"
        )),
        _ => StepOutcome::errored(format!("cannot read `{shown}`: {e}")),
    })
}

/// Writes `content` to `path` (creating parent directories) unless it already holds exactly
/// that, so that re-running a step leaves the tree untouched. Returns whether it wrote.
///
/// The file is replaced whole: the content goes to [`partial_path`] beside it, which is
/// then renamed over it (keeping the old file's permissions), so a Dray killed mid-write
/// leaves the old file, never an empty or cut one for the resumed step to edit. The
/// partial file's name is fixed, so the resumed step's write of the same file replaces a
/// leftover one.
pub(crate) fn write_if_changed(path: &Path, content: &str) -> Result<bool, StepOutcome> {
    if std::fs::read(path).is_ok_and(|old| old == content.as_bytes()) {
        return Ok(false);
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| {
            StepOutcome::errored(format!("cannot create `{}`: {e}", parent.display()))
        })?;
    }
    let cannot =
        |e: std::io::Error| StepOutcome::errored(format!("cannot write `{}`: {e}", path.display()));
    // A link (inside the work directory: `resolve` refuses others) is written through.
    let path = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => std::fs::canonicalize(path).map_err(cannot)?,
        _ => path.to_path_buf(),
    };
    let partial = partial_path(&path);
    std::fs::write(&partial, content).map_err(cannot)?;
    if let Ok(old) = std::fs::metadata(&path) {
        std::fs::set_permissions(&partial, old.permissions()).map_err(cannot)?;
    }
    std::fs::rename(&partial, &path).map_err(cannot)?;
    Ok(true)
}

/// Where [`write_if_changed`] writes `path`'s new content first: `.<name>.dray-partial`
/// beside it.
fn partial_path(path: &Path) -> PathBuf {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    path.with_file_name(format!(".{name}.dray-partial"))
}

/// Where rendered manifests go: one file, or one file per resource in a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OutPath {
    /// Everything in one file.
    File(PathBuf),
    /// `<kind>-<name>.yaml` per resource.
    Dir(PathBuf),
}

impl OutPath {
    /// A directory when `relative` ends with `/` or names an existing directory.
    pub(crate) fn resolve(ctx: &StepContext, relative: &str) -> Result<Self, StepOutcome> {
        let path = resolve(ctx, relative, true)?;
        if relative.ends_with('/') || path.is_dir() {
            Ok(OutPath::Dir(path))
        } else {
            Ok(OutPath::File(path))
        }
    }

    /// Writes rendered manifests; returns how many files it wrote or found up to date.
    pub(crate) fn write(&self, rendered: &str) -> Result<usize, StepOutcome> {
        match self {
            OutPath::File(path) => {
                write_if_changed(path, rendered)?;
                Ok(1)
            }
            OutPath::Dir(dir) => {
                let files = split_by_resource(rendered)?;
                for (name, text) in &files {
                    write_if_changed(&dir.join(name), text)?;
                }
                Ok(files.len())
            }
        }
    }
}

/// Splits a stream of YAML documents (as `kubectl kustomize` and `helm template` print them)
/// into `<kind>-<name>.yaml` (lowercase) → the document's text, kept byte for byte.
pub(crate) fn split_by_resource(rendered: &str) -> Result<BTreeMap<String, String>, StepOutcome> {
    let mut files = BTreeMap::<String, String>::new();
    let mut namespaces = BTreeMap::<String, String>::new();
    for (index, text) in documents(rendered).into_iter().enumerate() {
        let value: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).map_err(|e| {
            StepOutcome::failed(format!(
                "rendered document {} is not valid YAML: {e}",
                index + 1
            ))
        })?;
        if value.is_null() {
            continue;
        }
        let field = |path: &[&str]| {
            path.iter()
                .try_fold(&value, |v, key| v.get(key))
                .and_then(|v| v.as_str())
                .map(str::to_owned)
        };
        let (Some(kind), Some(name)) = (field(&["kind"]), field(&["metadata", "name"])) else {
            return Err(StepOutcome::failed(format!(
                "rendered document {} has no `kind` or `metadata.name`, so it cannot be written \
                 to a file of its own; write to a single file (an `outPath` without a trailing `/`)",
                index + 1
            )));
        };
        let file = format!("{}-{}.yaml", safe(&kind), safe(&name)).to_lowercase();
        let namespace = field(&["metadata", "namespace"]).unwrap_or_default();
        if let Some(other) = namespaces.insert(file.clone(), namespace.clone()) {
            return Err(StepOutcome::failed(format!(
                "two rendered resources would both be written to `{file}` (namespaces `{other}` \
                 and `{namespace}`); write to a single file (an `outPath` without a trailing `/`)"
            )));
        }
        files.insert(file, text);
    }
    Ok(files)
}

/// The documents of a YAML stream, split on `---` lines, each ending with a newline.
fn documents(stream: &str) -> Vec<String> {
    let mut docs = vec![String::new()];
    for line in stream.split_inclusive('\n') {
        let bare = line.trim_end();
        if bare == "---" || bare.starts_with("--- ") {
            docs.push(String::new());
        } else if let Some(current) = docs.last_mut() {
            current.push_str(line);
        }
    }
    docs.into_iter()
        .filter(|d| !d.trim().is_empty())
        .map(|mut d| {
            if !d.ends_with('\n') {
                d.push('\n');
            }
            d
        })
        .collect()
}

/// A name usable as part of a file name: path separators and odd characters become `_`.
fn safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{context, failed};

    #[test]
    fn manifests_split_into_one_file_per_resource() {
        let stream = "---\n# Source: c/templates/svc.yaml\napiVersion: v1\nkind: Service\n\
                      metadata:\n  name: Web\n---\napiVersion: rbac.authorization.k8s.io/v1\n\
                      kind: ClusterRole\nmetadata:\n  name: system:web\n---\n\n";
        let files = split_by_resource(stream).unwrap();
        let names: Vec<_> = files.keys().map(String::as_str).collect();
        assert_eq!(names, ["clusterrole-system_web.yaml", "service-web.yaml"]);
        assert!(files["service-web.yaml"].starts_with("# Source: c/templates/svc.yaml\n"));
    }

    /// A file is replaced whole through a partial file beside it: the old one's mode is
    /// kept, a link is written through, and a partial file a killed run left is replaced
    /// by the next write of that file and gone after it.
    #[test]
    fn a_write_replaces_the_file_whole_and_leaves_nothing_beside_it() {
        use std::os::unix::fs::PermissionsExt;

        let work = tempfile::tempdir().unwrap();
        let script = work.path().join("run.sh");
        std::fs::write(&script, "echo old\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(partial_path(&script), "echo cut").unwrap();
        assert!(write_if_changed(&script, "echo new\n").unwrap());
        assert_eq!(std::fs::read_to_string(&script).unwrap(), "echo new\n");
        let mode = std::fs::metadata(&script).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
        assert!(
            !write_if_changed(&script, "echo new\n").unwrap(),
            "unchanged"
        );

        let link = work.path().join("link.sh");
        std::os::unix::fs::symlink("run.sh", &link).unwrap();
        assert!(write_if_changed(&link, "echo linked\n").unwrap());
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read_to_string(&script).unwrap(), "echo linked\n");

        let fresh = work.path().join("deep/new.yaml");
        assert!(write_if_changed(&fresh, "a: 1\n").unwrap());
        assert_eq!(std::fs::read_to_string(&fresh).unwrap(), "a: 1\n");
        let mut left: Vec<String> = walk(work.path());
        left.sort();
        assert_eq!(
            left,
            ["deep/new.yaml", "link.sh", "run.sh"],
            "nothing beside them"
        );
    }

    /// The files under `dir`, relative.
    fn walk(dir: &Path) -> Vec<String> {
        let mut found = Vec::new();
        let mut todo = vec![dir.to_path_buf()];
        while let Some(at) = todo.pop() {
            for entry in std::fs::read_dir(&at).unwrap() {
                let path = entry.unwrap().path();
                if std::fs::symlink_metadata(&path).unwrap().is_dir() {
                    todo.push(path);
                } else {
                    let relative = path.strip_prefix(dir).unwrap();
                    found.push(relative.to_string_lossy().into_owned());
                }
            }
        }
        found
    }

    #[test]
    fn colliding_resources_are_refused() {
        let doc = |ns: &str| format!("kind: ConfigMap\nmetadata:\n  name: c\n  namespace: {ns}\n");
        let stream = format!("{}---\n{}", doc("a"), doc("b"));
        let reason = failed(split_by_resource(&stream).unwrap_err());
        assert!(reason.contains("`configmap-c.yaml`"), "{reason}");
    }

    #[test]
    fn symbolic_links_out_of_the_work_dir_are_refused() {
        let outside = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), work.path().join("link")).unwrap();
        std::os::unix::fs::symlink("/nonexistent/x", work.path().join("dangling")).unwrap();
        let ctx = context(work.path());
        let reason = failed(resolve(&ctx, "link/file.yaml", true).unwrap_err());
        assert!(reason.contains("through a symbolic link"), "{reason}");
        let reason = failed(resolve(&ctx, "dangling", true).unwrap_err());
        assert!(reason.contains("dangling symbolic link"), "{reason}");
        // The link itself may be handled (e.g. deleted) without following it.
        assert!(resolve(&ctx, "link", false).is_ok());
        assert!(resolve(&ctx, "a/new/file.yaml", true).is_ok());
        let reason = failed(resolve(&ctx, "../x", true).unwrap_err());
        assert!(
            reason.contains("leaves the promotion's work directory"),
            "{reason}"
        );
    }
}
