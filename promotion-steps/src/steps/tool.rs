//! Running an external renderer (`kubectl kustomize`, `kustomize build`, `helm template`)
//! the way Argo CD does: as a child process in the work directory, with a finite timeout,
//! stopped when the promotion is aborted.
//!
//! Not a step; the rendering steps call [`render`] and write what it prints.

use std::ffi::OsString;
use std::io::ErrorKind;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::{StepContext, StepOutcome};

/// How long a renderer may run. A chart or kustomization that pulls remote bases can hang on
/// the network; a promotion never waits forever.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(300);

/// A renderer: its name for messages, its path, and the setting that changes the path.
pub(crate) struct Tool<'a> {
    /// The tool's name in messages, e.g. `helm`.
    pub(crate) name: &'a str,
    /// What to install, e.g. `Helm`.
    pub(crate) product: &'a str,
    /// The program to run.
    pub(crate) program: &'a Path,
}

/// Runs `tool` with `args` in the work directory and returns what it printed on stdout.
///
/// A missing or unrunnable tool is `Errored` (fixing the machine and retrying may help); a
/// tool that runs and refuses (non-zero exit) is `Failed` with its stderr, since running it
/// again on the same input gives the same answer. Warnings on stderr go to the log.
pub(crate) async fn render(
    ctx: &StepContext,
    tool: &Tool<'_>,
    args: &[OsString],
    timeout: Duration,
) -> Result<String, StepOutcome> {
    let shown = command_line(tool.program, args);
    ctx.log(&format!("running `{shown}`"));
    let child = tokio::process::Command::new(tool.program)
        .args(args)
        .current_dir(&ctx.work_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| match e.kind() {
            ErrorKind::NotFound => StepOutcome::errored(format!(
                "{name} not found at `{path}`: install {product} or set the {name} path",
                name = tool.name,
                path = tool.program.display(),
                product = tool.product,
            )),
            _ => StepOutcome::errored(format!(
                "cannot run {name} at `{path}`: {e}; check that it is an executable or set the \
                 {name} path",
                name = tool.name,
                path = tool.program.display(),
            )),
        })?;
    let output = tokio::select! {
        output = child.wait_with_output() => output
            .map_err(|e| StepOutcome::errored(format!("`{shown}` did not complete: {e}")))?,
        () = tokio::time::sleep(timeout) => {
            return Err(StepOutcome::errored(format!(
                "`{shown}` did not finish within {timeout:?} and was stopped"
            )));
        }
        () = ctx.cancel.cancelled() => {
            return Err(StepOutcome::errored(format!(
                "`{shown}` was stopped: the promotion was aborted"
            )));
        }
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stderr = stderr.trim();
    if !output.status.success() {
        let status = output
            .status
            .code()
            .map_or_else(|| "a signal".to_owned(), |c| format!("exit code {c}"));
        let detail = if stderr.is_empty() {
            String::new()
        } else {
            format!(": {stderr}")
        };
        return Err(StepOutcome::failed(format!(
            "`{shown}` failed with {status}{detail}"
        )));
    }
    for line in stderr.lines() {
        ctx.log(&format!("{}: {line}", tool.name));
    }
    String::from_utf8(output.stdout)
        .map_err(|_| StepOutcome::failed(format!("`{shown}` printed output that is not UTF-8")))
}

/// The command as a person would type it, for logs and messages.
fn command_line(program: &Path, args: &[OsString]) -> String {
    std::iter::once(program.as_os_str())
        .chain(args.iter().map(OsString::as_os_str))
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{context, context_with_log, errored, failed};

    fn sh<'a>(program: &'a Path) -> Tool<'a> {
        Tool {
            name: "sh",
            product: "a shell",
            program,
        }
    }

    #[tokio::test]
    async fn stdout_is_returned_and_stderr_explains_a_failure() {
        let work = tempfile::tempdir().unwrap();
        let ctx = context(work.path());
        let program = Path::new("sh");
        let args = |script: &str| vec![OsString::from("-c"), OsString::from(script)];
        let out = render(&ctx, &sh(program), &args("echo ok"), TIMEOUT).await;
        assert_eq!(out.unwrap(), "ok\n");
        let (logged, lines) = context_with_log(work.path());
        let out = render(
            &logged,
            &sh(program),
            &args("echo warning: old >&2"),
            TIMEOUT,
        )
        .await;
        assert_eq!(out.unwrap(), "");
        let lines = lines.lock().unwrap().clone();
        assert_eq!(
            lines,
            ["running `sh -c echo warning: old >&2`", "sh: warning: old"]
        );
        let out = render(
            &ctx,
            &sh(program),
            &args("echo bad input >&2; exit 3"),
            TIMEOUT,
        )
        .await;
        let reason = failed(out.unwrap_err());
        assert!(
            reason.ends_with("failed with exit code 3: bad input"),
            "{reason}"
        );
    }

    #[tokio::test]
    async fn a_missing_tool_names_its_path_and_a_slow_one_is_stopped() {
        let work = tempfile::tempdir().unwrap();
        let ctx = context(work.path());
        let missing = Path::new("/nonexistent/helm");
        let tool = Tool {
            name: "helm",
            product: "Helm",
            program: missing,
        };
        let reason = errored(render(&ctx, &tool, &[], TIMEOUT).await.unwrap_err());
        assert_eq!(
            reason,
            "helm not found at `/nonexistent/helm`: install Helm or set the helm path"
        );
        let args = [OsString::from("-c"), OsString::from("sleep 30")];
        let out = render(&ctx, &sh(Path::new("sh")), &args, Duration::from_millis(50)).await;
        assert!(errored(out.unwrap_err()).contains("did not finish within"));
        ctx.cancel.cancel();
        let out = render(&ctx, &sh(Path::new("sh")), &args, TIMEOUT).await;
        assert!(errored(out.unwrap_err()).contains("the promotion was aborted"));
    }
}
