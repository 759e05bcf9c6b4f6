//! `untar`: extracts a tar file (gzipped or not, detected from its first bytes) into a
//! directory of the work directory (Kargo's `untar`), with `stripComponents` and
//! `.gitignore`-style `ignore` patterns.
//!
//! An archive is untrusted input (a downloaded chart, an artifact): an entry that would
//! land outside `outPath` (absolute, `..`, or through a symbolic link) fails the step, a
//! symbolic link pointing outside `outPath` fails it, hard links and device files fail it,
//! and [`MAX_BYTES`]/[`MAX_ENTRIES`] bound what one archive may write.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Component, Path, PathBuf};

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Map;

use super::archive::{Ignore, MAX_BYTES, MAX_ENTRIES, too_big};
use super::files::{on_blocking_pool, resolve};
use super::typed::TypedStep;
use crate::{StepContext, StepOutcome, Writes};

/// The name used in `uses:`.
pub(crate) const KIND: &str = "untar";

/// Configuration of `untar`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Config {
    /// The tar file to extract (`.tar` or gzipped), relative to the work directory.
    in_path: String,
    /// The directory to extract into (made when missing; files in it are replaced).
    out_path: String,
    /// Leading path components to remove from each entry (as `tar --strip-components`);
    /// entries with no more components are skipped.
    #[serde(default)]
    strip_components: usize,
    /// `.gitignore`-style patterns, one per line, of entries not to extract (matched after
    /// `stripComponents`).
    #[serde(default)]
    ignore: Option<String>,
}

/// The `untar` step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Untar;

#[async_trait]
impl TypedStep for Untar {
    const KIND: &'static str = KIND;
    const WRITES: Writes = Writes::Nothing;
    type Config = Config;

    async fn run_config(&self, ctx: &StepContext, config: Config) -> StepOutcome {
        let ctx = ctx.clone();
        on_blocking_pool(KIND, move || run(&ctx, &config)).await
    }
}

fn run(ctx: &StepContext, config: &Config) -> Result<StepOutcome, StepOutcome> {
    let archive_path = resolve(ctx, &config.in_path, true)?;
    let out = resolve(ctx, &config.out_path, true)?;
    let ignore = Ignore::parse(KIND, config.ignore.as_deref())?;
    let file = File::open(&archive_path).map_err(|_| {
        StepOutcome::failed(format!(
            "`{}` does not exist in the work directory; check `inPath`",
            config.in_path
        ))
    })?;
    let mut reader = BufReader::new(file);
    let gzipped = reader
        .fill_buf()
        .map(|head| head.starts_with(&[0x1f, 0x8b]))
        .unwrap_or(false);
    let stream: Box<dyn Read> = if gzipped {
        Box::new(flate2::read::GzDecoder::new(reader))
    } else {
        Box::new(reader)
    };
    std::fs::create_dir_all(&out)
        .map_err(|e| StepOutcome::errored(format!("cannot create `{}`: {e}", config.out_path)))?;
    let root = out
        .canonicalize()
        .map_err(|e| StepOutcome::errored(format!("cannot open `{}`: {e}", config.out_path)))?;
    let broken = |e: std::io::Error| {
        StepOutcome::failed(format!(
            "`{}` is not a readable tar archive: {e}",
            config.in_path
        ))
    };
    let refuse = |entry: &Path, why: &str| {
        StepOutcome::failed(format!(
            "`{}` holds `{}`, which {why}; the archive was not fully extracted, do not trust it",
            config.in_path,
            entry.display()
        ))
    };
    let mut archive = tar::Archive::new(stream);
    let (mut count, mut bytes) = (0usize, 0u64);
    for entry in archive.entries().map_err(broken)? {
        let mut entry = entry.map_err(broken)?;
        let original = entry.path().map_err(broken)?.into_owned();
        let Some(relative) = strip(&original, config.strip_components) else {
            continue;
        };
        if !stays_inside(&relative) {
            return Err(refuse(&original, "would be written outside `outPath`"));
        }
        let kind = entry.header().entry_type();
        if ignore.skips(&relative, kind.is_dir()) {
            continue;
        }
        count += 1;
        bytes += entry.header().size().unwrap_or(0);
        if count > MAX_ENTRIES || bytes > MAX_BYTES {
            return Err(too_big(KIND, &format!("`{}`", config.in_path)));
        }
        let target = root.join(&relative);
        match kind {
            tar::EntryType::Regular | tar::EntryType::Continuous | tar::EntryType::Directory => {}
            tar::EntryType::Symlink => {
                let link = entry.link_name().map_err(broken)?.unwrap_or_default();
                let resolved = relative.parent().unwrap_or(Path::new("")).join(&link);
                if link.is_absolute() || !stays_inside(&resolved) {
                    return Err(refuse(
                        &original,
                        "is a symbolic link pointing outside `outPath`",
                    ));
                }
            }
            tar::EntryType::XGlobalHeader | tar::EntryType::XHeader => continue,
            _ => return Err(refuse(&original, "is a hard link or a special file")),
        }
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| {
                StepOutcome::errored(format!("cannot create `{}`: {e}", parent.display()))
            })?;
            // A directory made earlier may be a link the archive planted: it must still
            // lead inside `outPath`.
            let real = parent.canonicalize().map_err(|e| {
                StepOutcome::errored(format!("cannot open `{}`: {e}", parent.display()))
            })?;
            if !real.starts_with(&root) {
                return Err(refuse(
                    &original,
                    "would be written through a link outside `outPath`",
                ));
            }
        }
        if target.symlink_metadata().is_ok_and(|m| !m.is_dir()) {
            let _ = std::fs::remove_file(&target);
        }
        entry.unpack(&target).map_err(|e| {
            StepOutcome::errored(format!("cannot extract `{}`: {e}", original.display()))
        })?;
    }
    ctx.log(&format!(
        "extracted {count} entries of `{}` into `{}`",
        config.in_path, config.out_path
    ));
    Ok(StepOutcome::succeeded(Map::new()))
}

/// `path` without its first `n` normal components; `None` when nothing is left.
fn strip(path: &Path, n: usize) -> Option<PathBuf> {
    let mut parts = path
        .components()
        .filter(|c| !matches!(c, Component::CurDir));
    for _ in 0..n {
        parts.next()?;
    }
    let rest: PathBuf = parts.collect();
    (!rest.as_os_str().is_empty()).then_some(rest)
}

/// Whether `relative`, resolved lexically, stays inside the directory it is relative to.
fn stays_inside(relative: &Path) -> bool {
    let mut depth = 0i64;
    for component in relative.components() {
        match component {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Step;
    use crate::testing::{context, failed, outputs};
    use serde_json::json;

    /// A tar archive of `(path, contents)` files, written raw so that hostile paths can be
    /// planted (the builder refuses them).
    fn archive(entries: &[Planted], gzip: bool) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (path, kind, body) in entries {
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(*kind);
            header.set_mode(0o644);
            let name = header.as_old_mut().name.as_mut();
            name[..path.len()].copy_from_slice(path.as_bytes());
            if *kind == tar::EntryType::Symlink {
                header.set_link_name(body).unwrap();
                header.set_size(0);
                header.set_cksum();
                builder.append(&header, std::io::empty()).unwrap();
            } else {
                header.set_size(body.len() as u64);
                header.set_cksum();
                builder.append(&header, body.as_bytes()).unwrap();
            }
        }
        let bytes = builder.into_inner().unwrap();
        if !gzip {
            return bytes;
        }
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut encoder, &bytes).unwrap();
        encoder.finish().unwrap()
    }

    const FILE: tar::EntryType = tar::EntryType::Regular;

    /// An entry to plant: its path, its type, its contents (a link's target).
    type Planted<'a> = (&'a str, tar::EntryType, &'a str);

    #[tokio::test]
    async fn extracts_gzipped_and_plain_archives_with_strip_and_ignore() {
        let work = tempfile::tempdir().unwrap();
        let w = work.path();
        let entries = [
            ("chart/Chart.yaml", FILE, "name: app\n"),
            ("chart/templates/cm.yaml", FILE, "kind: ConfigMap\n"),
            ("chart/ci/values.log", FILE, "x"),
            ("top", FILE, "skipped by strip"),
        ];
        std::fs::write(w.join("a.tgz"), archive(&entries, true)).unwrap();
        std::fs::write(w.join("a.tar"), archive(&entries, false)).unwrap();
        std::fs::create_dir_all(w.join("out")).unwrap();
        std::fs::write(w.join("out/Chart.yaml"), "old\n").unwrap();
        let ctx = context(w);
        outputs(
            Untar
                .run(&ctx, json!({"inPath": "a.tgz", "outPath": "out", "stripComponents": 1, "ignore": "*.log"}))
                .await,
        );
        assert_eq!(
            std::fs::read_to_string(w.join("out/Chart.yaml")).unwrap(),
            "name: app\n"
        );
        assert!(w.join("out/templates/cm.yaml").is_file());
        assert!(!w.join("out/ci/values.log").exists());
        assert!(!w.join("out/top").exists());
        outputs(
            Untar
                .run(&ctx, json!({"inPath": "a.tar", "outPath": "plain"}))
                .await,
        );
        assert_eq!(
            std::fs::read_to_string(w.join("plain/top")).unwrap(),
            "skipped by strip"
        );
        assert!(w.join("plain/chart/Chart.yaml").is_file());
    }

    #[tokio::test]
    async fn hostile_entries_fail_and_nothing_lands_outside() {
        let outside = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let w = work.path();
        let ctx = context(w);
        let evil = outside.path().join("evil");
        let absolute = evil.display().to_string();
        let cases: Vec<(Vec<Planted>, &str)> = vec![
            (vec![("../evil", FILE, "x")], "would be written outside"),
            (
                vec![("a/../../evil", FILE, "x")],
                "would be written outside",
            ),
            (
                vec![(absolute.as_str(), FILE, "x")],
                "would be written outside",
            ),
            (
                vec![("link", tar::EntryType::Symlink, absolute.as_str())],
                "pointing outside",
            ),
            (
                vec![("link", tar::EntryType::Symlink, "../..")],
                "pointing outside",
            ),
            (
                vec![("hard", tar::EntryType::Link, "/etc/passwd")],
                "hard link or a special file",
            ),
        ];
        for (n, (entries, wanted)) in cases.into_iter().enumerate() {
            let name = format!("evil{n}.tar");
            std::fs::write(w.join(&name), archive(&entries, false)).unwrap();
            let reason = failed(
                Untar
                    .run(&ctx, json!({"inPath": name, "outPath": "out"}))
                    .await,
            );
            assert!(reason.contains(wanted), "{n}: {reason}");
        }
        assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none());
        // A link inside `outPath` is fine.
        std::fs::write(
            w.join("ok.tar"),
            archive(
                &[
                    ("dir/f", FILE, "x"),
                    ("dir/link", tar::EntryType::Symlink, "f"),
                ],
                false,
            ),
        )
        .unwrap();
        outputs(
            Untar
                .run(&ctx, json!({"inPath": "ok.tar", "outPath": "fine"}))
                .await,
        );
        assert_eq!(
            std::fs::read_to_string(w.join("fine/dir/link")).unwrap(),
            "x"
        );
        std::fs::write(w.join("junk.tar"), "not a tar archive at all, just words").unwrap();
        let reason = failed(
            Untar
                .run(&ctx, json!({"inPath": "junk.tar", "outPath": "j"}))
                .await,
        );
        assert!(reason.contains("not a readable tar archive"), "{reason}");
    }
}
