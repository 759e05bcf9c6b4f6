//! Child processes the harness starts: output to a log file, readiness, kill on drop.
//!
//! Owns process lifecycle (spawn, SIGTERM, SIGKILL, reaping) and the HTTP readiness poll
//! shared by the registry and `dray serve`. Does not know what the processes are.

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// How long a service may take to answer its readiness probe.
pub(crate) const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// How many log lines an error message quotes.
const TAIL_LINES: usize = 40;

/// A running child process whose stdout and stderr are appended to a log file.
#[derive(Debug)]
pub(crate) struct Service {
    name: String,
    child: Option<Child>,
    log: PathBuf,
}

impl Service {
    /// Spawn `cmd` with stdin closed and both output streams appended to `log`.
    pub(crate) fn spawn(name: &str, cmd: &mut Command, log: &Path) -> Result<Self> {
        let out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("Failed to open the log file `{}`", log.display()))?;
        let err = out.try_clone()?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .with_context(|| format!("Failed to start `{name}` ({cmd:?})"))?;
        Ok(Self {
            name: name.to_owned(),
            child: Some(child),
            log: log.to_owned(),
        })
    }

    /// The process id, while it runs.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The exit status if the process has exited (reaping it).
    pub(crate) fn exit_status(&mut self) -> Option<ExitStatus> {
        let child = self.child.as_mut()?;
        child.try_wait().ok().flatten()
    }

    /// Whether the process is still running.
    pub(crate) fn is_running(&mut self) -> bool {
        self.child.is_some() && self.exit_status().is_none()
    }

    /// SIGKILL the process and reap it. A no-op once stopped.
    pub(crate) fn kill9(&mut self) -> Result<()> {
        if let Some(mut child) = self.child.take() {
            // `Child::kill` sends SIGKILL on Unix; it fails only if already reaped.
            let _ = child.kill();
            child
                .wait()
                .with_context(|| format!("Failed to reap `{}`", self.name))?;
        }
        Ok(())
    }

    /// SIGTERM the process and wait up to `timeout` for it to exit, then SIGKILL it.
    /// Returns the exit status when it exited on its own.
    pub(crate) fn terminate(&mut self, timeout: Duration) -> Result<Option<ExitStatus>> {
        let Some(pid) = self.pid() else {
            return Ok(None);
        };
        // The shell builtin `kill` exists everywhere, unlike /bin/kill (procps).
        let sent = Command::new("sh")
            .args(["-c", "kill -TERM \"$1\"", "sh", &pid.to_string()])
            .status()
            .context("Failed to run `sh -c kill -TERM`")?;
        if sent.success() {
            let deadline = Instant::now() + timeout;
            while Instant::now() < deadline {
                if let Some(status) = self.exit_status() {
                    self.child = None;
                    return Ok(Some(status));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        self.kill9()?;
        Ok(None)
    }

    /// The whole log text (lossy UTF-8).
    pub(crate) fn log(&self) -> String {
        read_lossy(&self.log)
    }

    /// Poll `GET http://addr{path}` until `accept(status)` or `timeout`; fail early if
    /// the process exits. Errors name the URL, the last observation and the log tail.
    pub(crate) fn wait_http(
        &mut self,
        addr: SocketAddr,
        path: &str,
        accept: fn(u16) -> bool,
        timeout: Duration,
    ) -> Result<()> {
        let deadline = Instant::now() + timeout;
        let mut last;
        loop {
            if let Some(status) = self.exit_status() {
                self.child = None;
                bail!(
                    "`{}` exited ({status}) before answering `GET http://{addr}{path}`; log tail:\n{}",
                    self.name,
                    tail(&self.log(), TAIL_LINES)
                );
            }
            match http_status(addr, path) {
                Ok(status) if accept(status) => return Ok(()),
                Ok(status) => last = format!("HTTP {status}"),
                Err(err) => last = err.to_string(),
            }
            if Instant::now() >= deadline {
                bail!(
                    "`{}` did not become ready: waited {timeout:?} for `GET http://{addr}{path}` \
                     (last: {last}); log tail:\n{}",
                    self.name,
                    tail(&self.log(), TAIL_LINES)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.kill9();
    }
}

/// The status code of a plain `GET` on a loopback address (blocking, no runtime needed).
pub(crate) fn http_status(addr: SocketAddr, path: &str) -> std::io::Result<u16> {
    let timeout = Duration::from_secs(2);
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut head = [0u8; 64];
    let mut len = 0;
    while len < 12 {
        let n = stream.read(&mut head[len..])?;
        if n == 0 {
            break;
        }
        len += n;
    }
    let line = String::from_utf8_lossy(&head[..len]);
    line.split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("not an HTTP response: {line:?}")))
}

/// A plain HTTP/1.0 `GET` on a loopback address with an optional bearer token (blocking,
/// no runtime needed, so it works in `Drop`): the status code and the body (lossy UTF-8).
pub(crate) fn http_get(
    addr: SocketAddr,
    path: &str,
    token: &str,
) -> std::io::Result<(u16, String)> {
    let timeout = Duration::from_secs(10);
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let auth = match token.is_empty() {
        true => String::new(),
        false => format!("Authorization: Bearer {token}\r\n"),
    };
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n"
    )?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("not an HTTP response: {head:?}")))?;
    Ok((status, body.to_owned()))
}

/// A file's content as lossy UTF-8, empty when it cannot be read.
pub(crate) fn read_lossy(path: &Path) -> String {
    std::fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// The last `lines` lines of `text`, or a note that there is nothing.
pub(crate) fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    if all.is_empty() {
        return "(the log is empty)".to_owned();
    }
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::{free_port, loopback};

    fn sh(dir: &Path, script: &str) -> Service {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", script]);
        Service::spawn("probe", &mut cmd, &dir.join("probe.log")).unwrap()
    }

    #[test]
    fn wait_http_reports_an_early_exit_with_the_log_tail() {
        let dir = tempfile::tempdir().unwrap();
        let mut service = sh(
            dir.path(),
            "echo 'bind: address already in use' >&2; exit 3",
        );
        let addr = loopback(free_port().unwrap());
        let err = service
            .wait_http(addr, "/healthz", |s| s == 200, READY_TIMEOUT)
            .unwrap_err();
        let message = format!("{err:#}");
        assert!(message.contains("exited"), "{message}");
        assert!(message.contains("address already in use"), "{message}");
    }

    #[test]
    fn wait_http_gives_up_after_the_timeout_naming_the_url() {
        let dir = tempfile::tempdir().unwrap();
        let mut service = sh(dir.path(), "echo started; exec sleep 60");
        let addr = loopback(free_port().unwrap());
        let err = service.wait_http(addr, "/v2/", |s| s == 200, Duration::from_millis(300));
        let message = format!("{:#}", err.unwrap_err());
        assert!(
            message.contains(&format!("GET http://{addr}/v2/")),
            "{message}"
        );
        assert!(message.contains("started"), "{message}");
        let pid = service.pid().unwrap();
        drop(service);
        // Killed and reaped on drop: the pid no longer names a live process.
        let alive = Command::new("sh")
            .args(["-c", "kill -0 \"$1\" 2>/dev/null", "sh", &pid.to_string()])
            .status()
            .unwrap();
        assert!(!alive.success());
    }

    #[test]
    fn terminate_lets_the_process_exit_on_sigterm() {
        let dir = tempfile::tempdir().unwrap();
        let ready = dir.path().join("trapped");
        let script = format!(
            "trap 'exit 7' TERM; touch '{}'; while :; do sleep 0.05; done",
            ready.display()
        );
        let mut service = sh(dir.path(), &script);
        let deadline = Instant::now() + READY_TIMEOUT;
        while !ready.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let status = service.terminate(Duration::from_secs(10)).unwrap();
        assert_eq!(status.and_then(|s| s.code()), Some(7));
        assert!(!service.is_running());
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        assert_eq!(tail("a\nb\nc\n", 2), "b\nc");
        assert_eq!(tail("a", 5), "a");
        assert_eq!(tail("", 5), "(the log is empty)");
    }
}
