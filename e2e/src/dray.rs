//! `dray serve` as a child process, and the `dray` CLI pointed at it.
//!
//! Owns the server's data directory, port, log file and lifecycle: start and wait for
//! `GET /healthz`, SIGKILL, graceful stop, restart on the same data dir and port.
//! The binary comes from `DRAY_BIN` or `<workspace>/target/debug/dray`; this module
//! never builds it. Does not know Dray's API: tests talk to `url()` themselves, sending
//! `token()` (the bootstrap admin token from `<data>/bootstrap-token`) as bearer token;
//! `cli()` passes it as `DRAY_TOKEN`. With `--auth none` in `DrayOptions.args` there is
//! no token and `token()` is empty.
//!
//! Leaks: every secret the harness made (see [`crate::secrets`]) is looked for in the
//! server's log after every kill, stop and restart and when the server is dropped, in
//! every `cli()` output, and — on drop, while the server runs — in a sweep of the API
//! (every project's resources of every kind, the token list, each project's page). The
//! bootstrap token may appear once in the log (the first start's banner shows it by
//! design), a new token once in the stdout of `dray token create`; nothing else may.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::process::{READY_TIMEOUT, Service, http_get};
use crate::secrets;
use crate::world::{TestWorld, free_port, loopback, workspace_root};

/// The environment variable naming the `dray` binary under test.
pub const DRAY_BIN_ENV: &str = "DRAY_BIN";

/// The environment variable the CLI reads for the server URL.
pub const DRAY_SERVER_ENV: &str = "DRAY_SERVER";

/// The environment variable the CLI reads for the API token.
pub const DRAY_TOKEN_ENV: &str = "DRAY_TOKEN";

/// The file in the data directory where a new server writes its bootstrap admin token.
pub const BOOTSTRAP_TOKEN_FILE: &str = "bootstrap-token";

/// How to start `dray serve`.
#[derive(Clone, Debug, Default)]
pub struct DrayOptions {
    /// Config files or directories, each passed as `--config PATH`.
    pub config: Vec<PathBuf>,
    /// Extra arguments after the standard ones.
    pub args: Vec<String>,
    /// Extra environment variables (e.g. `RUST_LOG`, forge tokens).
    pub env: Vec<(String, String)>,
}

/// A `dray serve` process on 127.0.0.1; killed on drop.
#[derive(Debug)]
pub struct Dray {
    world: TestWorld,
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    options: DrayOptions,
    service: Option<Service>,
    token: String,
}

impl Dray {
    /// The binary under test: `$DRAY_BIN`, else `<workspace>/target/debug/dray`.
    pub fn binary() -> PathBuf {
        match std::env::var_os(DRAY_BIN_ENV) {
            Some(bin) if !bin.is_empty() => PathBuf::from(bin),
            _ => workspace_root().join("target").join("debug").join("dray"),
        }
    }

    /// Whether the binary under test exists (tests needing it may skip without it).
    pub fn is_available() -> bool {
        Self::binary().is_file()
    }

    /// Start `dray serve` with a fresh data directory on a free port and wait for
    /// `GET /healthz` to answer 200.
    pub fn start(world: &TestWorld, options: DrayOptions) -> Result<Self> {
        let bin = Self::binary();
        if !bin.is_file() {
            bail!(
                "The dray binary `{}` does not exist\nhint: run `cargo build -p dray` or set `{DRAY_BIN_ENV}`",
                bin.display()
            );
        }
        let dir = world.unique_dir("dray")?;
        std::fs::create_dir_all(dir.join("data"))?;
        remember_options(&options);
        let mut dray = Self {
            world: world.clone(),
            bin,
            dir,
            port: free_port()?,
            options,
            service: None,
            token: String::new(),
        };
        dray.restart()?;
        Ok(dray)
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", loopback(self.port))
    }

    /// The bootstrap admin token (user `admin`, `dray-admin` in every project), read from
    /// `<data>/bootstrap-token` after start; empty under `--auth none`.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Uses `token` for the CLI and API from now on (in Kubernetes mode, a Kubernetes
    /// token the API server knows; there is no bootstrap token).
    pub fn set_token(&mut self, token: &str) {
        secrets::remember("the token the tests call `dray serve` with", token);
        self.token = token.to_owned();
    }

    /// The port, kept across restarts.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's process id while it runs (benchmarks read its CPU time in `/proc`).
    pub fn pid(&self) -> Option<u32> {
        self.service.as_ref().and_then(Service::pid)
    }

    /// The `--data-dir`, kept across restarts.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// Everything the server printed (stdout and stderr), across restarts.
    pub fn log(&self) -> String {
        crate::process::read_lossy(&self.log_path())
    }

    /// The last `lines` lines the server printed.
    pub fn log_tail(&self, lines: usize) -> String {
        let log = self.log();
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// The log file's path.
    pub fn log_path(&self) -> PathBuf {
        self.dir.join("dray.log")
    }

    /// Whether the server process is running.
    pub fn is_running(&mut self) -> bool {
        self.service.as_mut().is_some_and(Service::is_running)
    }

    /// Kill the server with SIGKILL (no chance to clean up), e.g. mid-promotion.
    pub fn kill9(&mut self) -> Result<()> {
        if let Some(mut service) = self.service.take() {
            service.kill9()?;
            self.check_log()?;
        }
        Ok(())
    }

    /// Stop the server with SIGTERM, waiting up to `timeout` before SIGKILL. Returns
    /// its exit status if it exited on its own.
    pub fn stop(&mut self, timeout: Duration) -> Result<Option<ExitStatus>> {
        match self.service.take() {
            Some(mut service) => {
                let status = service.terminate(timeout)?;
                self.check_log()?;
                Ok(status)
            }
            None => Ok(None),
        }
    }

    /// Start the server again on the same data dir and port (SIGKILLing it first if it
    /// still runs) and wait for `/healthz`.
    pub fn restart(&mut self) -> Result<()> {
        self.kill9()?;
        let mut cmd = Command::new(&self.bin);
        cmd.arg("serve")
            .arg("--data-dir")
            .arg(self.data_dir())
            .arg("--listen")
            .arg(loopback(self.port).to_string());
        for config in &self.options.config {
            cmd.arg("--config").arg(config);
        }
        cmd.args(&self.options.args)
            .current_dir(&self.dir)
            .env("HOME", self.world.home())
            .env("GIT_TERMINAL_PROMPT", "0")
            .envs(self.options.env.iter().map(|(k, v)| (k, v)));
        let mut service = Service::spawn(
            &format!("{} serve", self.bin.display()),
            &mut cmd,
            &self.log_path(),
        )?;
        service.wait_http(loopback(self.port), "/healthz", |s| s == 200, READY_TIMEOUT)?;
        self.service = Some(service);
        let path = self.data_dir().join(BOOTSTRAP_TOKEN_FILE);
        self.token = match std::fs::read_to_string(&path) {
            Ok(text) => text.trim().to_owned(),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(error) => {
                return Err(error).with_context(|| format!("Failed to read `{}`", path.display()));
            }
        };
        secrets::remember("the bootstrap token of `dray serve`", &self.token);
        self.check_log()?;
        Ok(())
    }

    /// Fails when the server's log (across restarts) shows a secret; the bootstrap token
    /// may appear once, in the first start's banner.
    pub fn check_log(&self) -> Result<()> {
        let log = self.log();
        let banner = log
            .contains(BOOTSTRAP_BANNER)
            .then_some(self.token.as_str());
        secrets::check_except(
            &format!("the log of `dray serve` ({})", self.log_path().display()),
            &log,
            &banner.into_iter().collect::<Vec<_>>(),
        )
    }

    /// Fails when an API response or a page of the running server shows a secret: every
    /// project's resources of every kind, the token list and each project's page.
    pub fn check_api(&self) -> Result<()> {
        let addr = loopback(self.port);
        let get = |path: &str| -> Result<String> {
            let (_, body) = http_get(addr, path, &self.token)
                .with_context(|| format!("Failed to GET {path} of `dray serve`"))?;
            secrets::check(&format!("the response to `GET {path}`"), &body)?;
            Ok(body)
        };
        let projects = get("/api/v1/projects")?;
        get("/api/v1/tokens")?;
        let projects: Vec<serde_json::Value> = serde_json::from_str(&projects).unwrap_or_default();
        for project in projects {
            let Some(name) = project.pointer("/metadata/name").and_then(|n| n.as_str()) else {
                continue;
            };
            for kind in dray::api::Kind::ALL
                .into_iter()
                .filter(|k| k.is_namespaced())
            {
                get(&format!("/api/v1/projects/{name}/{}", kind.plural()))?;
            }
            get(&format!("/projects/{name}"))?;
        }
        Ok(())
    }

    /// Run `dray ARGS` with `DRAY_SERVER=URL` (and `DRAY_TOKEN` set to
    /// [`Dray::token`]) and return its output.
    pub fn cli<I, S>(&self, args: I) -> Result<Output>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let args: Vec<std::ffi::OsString> =
            args.into_iter().map(|a| a.as_ref().to_owned()).collect();
        let words: Vec<String> = args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        if let Some(file) = applied_file(&words) {
            let path = self.world.path().join(file);
            secrets::remember_credentials_in(&crate::process::read_lossy(&path));
        }
        let mut cmd = self.cli_command();
        cmd.args(&args);
        let output = cmd
            .output()
            .with_context(|| format!("Failed to run {cmd:?}"))?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        // `dray token create` prints the new token once, by design: allowed there only.
        let made =
            (creates_token(&words) && output.status.success()).then(|| stdout.trim().to_owned());
        if let Some(token) = &made {
            secrets::remember(
                format!("the token made by `dray {}`", words.join(" ")),
                token,
            );
        }
        let place = format!("the output of `dray {}`", words.join(" "));
        secrets::check_except(
            &format!("{place} (stdout)"),
            &stdout,
            &made.iter().map(String::as_str).collect::<Vec<_>>(),
        )?;
        secrets::check(
            &format!("{place} (stderr)"),
            &String::from_utf8_lossy(&output.stderr),
        )?;
        Ok(output)
    }

    /// The `dray` command with `DRAY_SERVER` set to the server's URL and `DRAY_TOKEN` to
    /// [`Dray::token`], to add arguments, stdin or env to (e.g. another user's `DRAY_TOKEN`).
    /// The client options are the subcommands' (`dray get stages --server URL`), so the URL
    /// goes in the environment; `HOME` is the world's, so no saved context of the machine's
    /// user (`~/.config/dray/config.yaml`) is read.
    pub fn cli_command(&self) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.env(DRAY_SERVER_ENV, self.url())
            .env("HOME", self.world.home())
            .env("NO_COLOR", "1")
            .env_remove(DRAY_TOKEN_ENV)
            .env_remove("DRAY_PROJECT")
            .env_remove("DRAY_CONFIG")
            .env_remove("XDG_CONFIG_HOME")
            .current_dir(self.world.path());
        if !self.token.is_empty() {
            cmd.env(DRAY_TOKEN_ENV, &self.token);
        }
        cmd
    }

    /// The world this server lives in.
    pub fn world(&self) -> &TestWorld {
        &self.world
    }

    /// The directory holding the data dir and log.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// How many of the server's last log lines a failing test shows.
const LOG_TAIL_ON_FAILURE: usize = 120;

/// The line of the first start's banner just before it shows the bootstrap token.
const BOOTSTRAP_BANNER: &str = "It is shown only this once:";

/// Remembers the secrets `options` pass to the server: environment variables named like
/// a secret, `--…secret…`/`--…token…`/`--…password…` arguments (the content of the file
/// for `…-file`), and the Credential documents of `--config` files.
fn remember_options(options: &DrayOptions) {
    let secret_like = |name: &str| {
        let name = name.to_ascii_lowercase();
        ["secret", "token", "password", "private"]
            .iter()
            .any(|word| name.contains(word))
    };
    for (name, value) in &options.env {
        if secret_like(name) {
            secrets::remember(
                format!("the environment variable `{name}` of `dray serve`"),
                value,
            );
        }
    }
    let mut args = options.args.iter();
    while let Some(arg) = args.next() {
        let (flag, value) = match arg.split_once('=') {
            Some((flag, value)) => (flag, Some(value.to_owned())),
            None => (arg.as_str(), None),
        };
        if !flag.starts_with("--") || !secret_like(flag) {
            continue;
        }
        let Some(value) = value.or_else(|| args.next().cloned()) else {
            continue;
        };
        let label = format!("the argument `{flag}` of `dray serve`");
        match flag.ends_with("-file") {
            true => secrets::remember(label, &crate::process::read_lossy(Path::new(&value))),
            false => secrets::remember(label, &value),
        }
    }
    for config in &options.config {
        let files: Vec<PathBuf> = match std::fs::read_dir(config) {
            Ok(dir) => dir.flatten().map(|e| e.path()).collect(),
            Err(_) => vec![config.clone()],
        };
        for file in files {
            secrets::remember_credentials_in(&crate::process::read_lossy(&file));
        }
    }
}

/// The file of `dray apply -f FILE`, if these are its arguments.
fn applied_file(words: &[String]) -> Option<&str> {
    if !words.iter().any(|w| w == "apply") {
        return None;
    }
    let at = words.iter().position(|w| w == "-f" || w == "--file")?;
    words.get(at + 1).map(String::as_str).filter(|f| *f != "-")
}

/// Whether these are the arguments of `dray token create`.
fn creates_token(words: &[String]) -> bool {
    words
        .windows(2)
        .any(|pair| pair[0] == "token" && pair[1] == "create")
}

impl Drop for Dray {
    /// A test that fails (panics) while the server is in scope shows the end of the
    /// server's log with its own output, so a failure on CI can be read without the
    /// test's temporary directory.
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let checked = match self.is_running() {
                true => self.check_api(),
                false => Ok(()),
            }
            .and_then(|()| self.check_log());
            if let Err(leak) = checked {
                panic!("{leak:#}");
            }
        }
        if std::thread::panicking() {
            eprintln!(
                "--- the end of `dray serve`'s log ({}) ---\n{}\n--- end of log ---",
                self.log_path().display(),
                self.log_tail(LOG_TAIL_ON_FAILURE)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checks bite: a value planted in a Project's description (which Dray shows,
    /// as it should) and remembered as a secret fails the CLI output, the API sweep and
    /// the log check, each naming the secret by label and never by value.
    #[test]
    fn a_remembered_value_dray_shows_fails_the_cli_the_api_sweep_and_the_log() {
        if !Dray::is_available() {
            eprintln!("skipped: no dray binary (build it with `cargo build -p dray --bin dray`)");
            return;
        }
        let planted = "planted-harness-secret-5f3a9c";
        let world = TestWorld::new().unwrap();
        let dray = Dray::start(&world, DrayOptions::default()).unwrap();
        let file = world.path().join("project.yaml");
        std::fs::write(
            &file,
            format!(
                "apiVersion: dray.dev/v1alpha1\nkind: Project\nmetadata:\n  name: planted\n\
                 spec:\n  description: {planted}\n"
            ),
        )
        .unwrap();
        let applied = dray.cli(["apply", "-f", file.to_str().unwrap()]).unwrap();
        assert!(applied.status.success(), "{applied:?}");
        secrets::remember("the planted test secret", planted);
        let shown = dray
            .cli(["get", "project", "planted", "-o", "json"])
            .unwrap_err()
            .to_string();
        let swept = dray.check_api().unwrap_err().to_string();
        for found in [&shown, &swept] {
            assert!(found.contains("`the planted test secret`"), "{found}");
            assert!(!found.contains(planted), "{found}");
        }
        assert!(
            shown.contains("the output of `dray get project planted"),
            "{shown}"
        );
        assert!(
            swept.contains("the response to `GET /api/v1/projects`"),
            "{swept}"
        );
        assert!(dray.check_log().is_ok());
        // The bootstrap token may show once, in the banner, and no more.
        assert!(dray.log().contains(BOOTSTRAP_BANNER));
        std::fs::write(
            dray.log_path(),
            format!("{}\nleaked {}\n", dray.log(), dray.token()),
        )
        .unwrap();
        let logged = dray.check_log().unwrap_err().to_string();
        assert!(
            logged.contains("`the bootstrap token of `dray serve``"),
            "{logged}"
        );
        secrets::forget(planted);
        secrets::forget(dray.token());
    }
}
