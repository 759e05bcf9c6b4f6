//! A headless Chromium driven over WebDriver, for tests of the web UI as a person uses it.
//!
//! Owns one `chromedriver` process on a free loopback port, one fantoccini session in
//! Debian's `/usr/bin/chromium` with a fresh profile directory, screenshots under
//! `<target>/e2e-artifacts/`, and the bounded waits UI tests need ([`Browser::wait_for`],
//! [`Browser::wait_for_text`]). Dropping a [`Browser`] ends the session and stops
//! `chromedriver` and every Chromium process of its profile; nothing outlives the test.
//! Does not know Dray: tests navigate with [`Browser::goto`] or [`Browser::client`].
//! Every page `goto`, `wait_for` and `wait_for_text` land on is checked for the secrets
//! the harness made ([`crate::secrets`]); one shown fails the test.
//!
//! ```no_run
//! # async fn example() -> anyhow::Result<()> {
//! let browser = dray_e2e::browser::Browser::start().await?;
//! browser.goto("http://127.0.0.1:7070/login").await?;
//! browser.wait_for("form#login", "the login form").await?;
//! browser.screenshot("login").await?;
//! # Ok(()) }
//! ```

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::process::{READY_TIMEOUT, Service, read_lossy, tail};
use crate::world::{KEEP_ENV, free_port, loopback, workspace_root};

/// Debian's Chromium, the only browser the harness drives.
pub const CHROMIUM_BIN: &str = "/usr/bin/chromium";

/// The WebDriver server for [`CHROMIUM_BIN`] (Debian's `chromium-driver`), looked up in `PATH`.
pub const CHROMEDRIVER_BIN: &str = "chromedriver";

/// What to do when either is missing.
const INSTALL_HINT: &str = "install chromium and chromium-driver (e2e/test.sh does)";

/// How long [`Browser::wait_for`] and [`Browser::wait_for_text`] wait by default.
pub const WAIT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long Chromium may take to start and open a session (slow on a busy 2-core machine).
const SESSION_TIMEOUT: Duration = Duration::from_secs(60);

/// How long one WebDriver command may take (navigation included).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// How long stopping the session and `chromedriver` may take before they are killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// How often the waits look again.
const POLL: Duration = Duration::from_millis(50);

/// Chromium's flags: headless, no sandbox (tests run as root), and no traffic to Google's
/// services (the machine's network is closed; see `/work/shared/design/TESTING.md`).
const CHROMIUM_ARGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
];

/// A headless Chromium session behind its own `chromedriver`; both stop on drop.
pub struct Browser {
    client: Client,
    driver: Driver,
    wait_timeout: Duration,
}

/// The `chromedriver` process and the directory it and Chromium write to. Its drop ends
/// the session, stops the driver and kills what is left of the profile's Chromium.
struct Driver {
    service: Service,
    addr: SocketAddr,
    session_id: Option<String>,
    /// Holds the profile (`profile/`), `HOME` and the driver's log; removed on drop
    /// (kept with `DRAY_E2E_KEEP=1`).
    dir: TempDir,
}

impl std::fmt::Debug for Browser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Browser")
            .field("chromedriver", &self.driver.addr)
            .field("session_id", &self.driver.session_id)
            .field("dir", &self.driver.dir.path())
            .finish()
    }
}

impl Browser {
    /// Whether Chromium and ChromeDriver are installed (tests may skip without them).
    pub fn is_available() -> bool {
        Path::new(CHROMIUM_BIN).is_file() && find_in_path(CHROMEDRIVER_BIN).is_some()
    }

    /// Start `chromedriver` on a free loopback port, wait until `GET /status` says it is
    /// ready, and open a session in a headless Chromium with a fresh profile.
    pub async fn start() -> Result<Self> {
        if !Path::new(CHROMIUM_BIN).is_file() {
            bail!(
                "Chromium is not installed: `{CHROMIUM_BIN}` does not exist\nhint: {INSTALL_HINT}"
            );
        }
        let driver_bin = find_in_path(CHROMEDRIVER_BIN).with_context(|| {
            format!("ChromeDriver is not installed: `{CHROMEDRIVER_BIN}` is not in PATH\nhint: {INSTALL_HINT}")
        })?;

        let mut dir = tempfile::Builder::new()
            .prefix("dray-browser-")
            .tempdir()
            .context("Failed to create the browser's temporary directory")?;
        if std::env::var_os(KEEP_ENV).is_some_and(|v| v == "1") {
            dir.disable_cleanup(true);
            eprintln!("{KEEP_ENV}=1: keeping `{}`", dir.path().display());
        }
        let profile = dir.path().join("profile");
        let home = dir.path().join("home");
        for d in [&profile, &home] {
            std::fs::create_dir_all(d)
                .with_context(|| format!("Failed to create `{}`", d.display()))?;
        }

        let port = free_port()?;
        let addr = loopback(port);
        let mut cmd = Command::new(&driver_bin);
        cmd.arg(format!("--port={port}"))
            .env("HOME", &home)
            .current_dir(dir.path());
        let log = dir.path().join("chromedriver.log");
        let service = Service::spawn("chromedriver", &mut cmd, &log)?;
        let mut driver = Driver {
            service,
            addr,
            session_id: None,
            dir,
        };
        driver.wait_ready().await?;

        let mut capabilities = serde_json::Map::new();
        capabilities.insert("browserName".into(), json!("chrome"));
        let mut args: Vec<String> = CHROMIUM_ARGS.iter().map(|a| (*a).to_owned()).collect();
        args.push(format!("--user-data-dir={}", profile.display()));
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({ "binary": CHROMIUM_BIN, "args": args }),
        );
        let url = format!("http://{addr}");
        let mut builder =
            ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new());
        builder.capabilities(capabilities);
        let client = match tokio::time::timeout(SESSION_TIMEOUT, builder.connect(&url)).await {
            Ok(Ok(client)) => client,
            Ok(Err(err)) => bail!(
                "chromedriver at {url} could not start Chromium (`{CHROMIUM_BIN}`): {err}\n\
                 chromedriver log tail:\n{}",
                driver.log_tail()
            ),
            Err(_) => bail!(
                "waited {SESSION_TIMEOUT:?} for chromedriver at {url} to start Chromium \
                 (`{CHROMIUM_BIN}`) and open a session\nchromedriver log tail:\n{}",
                driver.log_tail()
            ),
        };
        driver.session_id = client.session_id().await.ok().flatten();
        client
            .update_timeouts(fantoccini::wd::TimeoutConfiguration::new(
                Some(Duration::from_secs(10)),
                Some(COMMAND_TIMEOUT),
                Some(Duration::ZERO),
            ))
            .await
            .context("Failed to set the session's timeouts")?;
        Ok(Self {
            client,
            driver,
            wait_timeout: WAIT_TIMEOUT,
        })
    }

    /// The WebDriver client, for anything the helpers here do not cover.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Change how long [`Browser::wait_for`] and [`Browser::wait_for_text`] wait.
    pub fn set_wait_timeout(&mut self, timeout: Duration) {
        self.wait_timeout = timeout;
    }

    /// Navigate to `url` and wait for the page to load; fails when the page shows a
    /// secret (see [`crate::secrets`]).
    pub async fn goto(&self, url: &str) -> Result<()> {
        self.client()
            .goto(url)
            .await
            .with_context(|| format!("Failed to open `{url}` in Chromium"))?;
        self.check_page().await
    }

    /// Logs in to the web UI at `base` with the API token `token`, as a person would:
    /// the login page's token field and its Log in button.
    pub async fn log_in(&self, base: &str, token: &str) -> Result<()> {
        self.goto(&format!("{base}/login")).await?;
        let field = self.wait_for("#token", "the token field").await?;
        field.send_keys(token).await?;
        self.wait_for("#login", "the Log in button")
            .await?
            .click()
            .await?;
        Ok(())
    }

    /// Fails when the current page's source shows a secret the harness made.
    pub async fn check_page(&self) -> Result<()> {
        let source = self
            .client()
            .source()
            .await
            .context("Failed to read the page's source from Chromium")?;
        crate::secrets::check(&format!("the page {}", self.current_url().await), &source)
    }

    /// The page's current URL, or a note why it is unknown (for error messages).
    pub async fn current_url(&self) -> String {
        match self.client().current_url().await {
            Ok(url) => url.to_string(),
            Err(err) => format!("(unknown: {err})"),
        }
    }

    /// Wait until an element matching the CSS selector `css` is on the page and shown;
    /// `what` says in words what it is (e.g. "the Promote button"), for the error.
    pub async fn wait_for(&self, css: &str, what: &str) -> Result<Element> {
        let deadline = Instant::now() + self.wait_timeout;
        let mut last;
        loop {
            match self.client().find(Locator::Css(css)).await {
                Ok(element) => match element.is_displayed().await {
                    Ok(true) => {
                        self.check_page().await?;
                        return Ok(element);
                    }
                    Ok(false) => last = "an element matched but is hidden".into(),
                    Err(err) => last = format!("an element matched but went away: {err}"),
                },
                Err(err) if err.is_no_such_element() => last = "no element matched".into(),
                Err(err) => last = err.to_string(),
            }
            if Instant::now() >= deadline {
                bail!(
                    "waited {:?} for {what} (`{css}`) on {}: {last}",
                    self.wait_timeout,
                    self.current_url().await
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Wait until an element matching `css` shows text containing `text`; returns it.
    pub async fn wait_for_text(&self, css: &str, text: &str) -> Result<Element> {
        let deadline = Instant::now() + self.wait_timeout;
        let mut last;
        loop {
            match self.client().find_all(Locator::Css(css)).await {
                Ok(elements) if elements.is_empty() => last = "no element matched".into(),
                Ok(elements) => {
                    let mut seen = Vec::new();
                    for element in elements {
                        match element.text().await {
                            Ok(shown) if shown.contains(text) => {
                                self.check_page().await?;
                                return Ok(element);
                            }
                            Ok(shown) => seen.push(format!("{shown:?}")),
                            Err(err) => seen.push(format!("(gone: {err})")),
                        }
                    }
                    last = format!("matching elements show {}", seen.join(", "));
                }
                Err(err) => last = err.to_string(),
            }
            if Instant::now() >= deadline {
                bail!(
                    "waited {:?} for `{css}` to show {text:?} on {}: {last}",
                    self.wait_timeout,
                    self.current_url().await
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Save a PNG of the viewport as `<target>/e2e-artifacts/<name>.png` (`<target>` is
    /// `$CARGO_TARGET_DIR` or `<workspace>/target`) and return its path. `name` may use
    /// letters, digits, `-`, `_` and `.`.
    pub async fn screenshot(&self, name: &str) -> Result<PathBuf> {
        check_screenshot_name(name)?;
        let png = self
            .client()
            .screenshot()
            .await
            .with_context(|| format!("Failed to take the screenshot `{name}`"))?;
        let dir = artifacts_dir();
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("Failed to create `{}`", dir.display()))?;
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png)
            .with_context(|| format!("Failed to write the screenshot `{}`", path.display()))?;
        Ok(path)
    }

    /// Everything chromedriver printed.
    pub fn log(&self) -> String {
        self.driver.log()
    }

    /// The profile directory Chromium runs with (unique to this browser).
    pub fn profile_dir(&self) -> PathBuf {
        self.driver.profile_dir()
    }

    /// chromedriver's process id, while it runs.
    pub fn driver_pid(&self) -> Option<u32> {
        self.driver.service.pid()
    }
}

impl Driver {
    /// Poll `GET /status` until chromedriver reports `ready`, failing early if it exits.
    async fn wait_ready(&mut self) -> Result<()> {
        let url = format!("http://{}/status", self.addr);
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .no_proxy()
            .build()?;
        let deadline = Instant::now() + READY_TIMEOUT;
        let mut last;
        loop {
            if let Some(status) = self.service.exit_status() {
                bail!(
                    "chromedriver exited ({status}) before answering `GET {url}`; log tail:\n{}",
                    self.log_tail()
                );
            }
            match http.get(&url).send().await {
                Ok(response) => match response.json::<Value>().await {
                    Ok(body) if body["value"]["ready"] == true => return Ok(()),
                    Ok(body) => last = format!("not ready: {body}"),
                    Err(err) => last = format!("not JSON: {err}"),
                },
                Err(err) => last = err.to_string(),
            }
            if Instant::now() >= deadline {
                bail!(
                    "chromedriver did not become ready: waited {READY_TIMEOUT:?} for `GET {url}` \
                     to report ready (last: {last}); log tail:\n{}",
                    self.log_tail()
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    fn log(&self) -> String {
        read_lossy(&self.dir.path().join("chromedriver.log"))
    }

    fn log_tail(&self) -> String {
        tail(&self.log(), 40)
    }

    fn profile_dir(&self) -> PathBuf {
        self.dir.path().join("profile")
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // Ending the session makes chromedriver quit Chromium; `/shutdown` ends chromedriver.
        // Both are blocking requests with short timeouts: Drop cannot await, and the
        // client's own asynchronous close would race with killing the driver.
        if let Some(id) = self.session_id.take() {
            let _ = blocking_request(self.addr, "DELETE", &format!("/session/{id}"));
        }
        let _ = blocking_request(self.addr, "GET", "/shutdown");
        let deadline = Instant::now() + STOP_TIMEOUT;
        while self.service.is_running() && Instant::now() < deadline {
            std::thread::sleep(POLL);
        }
        let _ = self.service.kill9();
        // Whatever Chromium process is left of this profile (a crashed session) is ours.
        kill_profile_processes(&self.profile_dir());
    }
}

/// `$CARGO_TARGET_DIR/e2e-artifacts` (relative to the workspace when relative), else
/// `<workspace>/target/e2e-artifacts`.
pub fn artifacts_dir() -> PathBuf {
    artifacts_dir_in(std::env::var_os("CARGO_TARGET_DIR"))
}

fn artifacts_dir_in(target_dir: Option<std::ffi::OsString>) -> PathBuf {
    let target = match target_dir {
        Some(dir) if !dir.is_empty() => workspace_root().join(dir),
        _ => workspace_root().join("target"),
    };
    target.join("e2e-artifacts")
}

/// A screenshot name must be a plain file name: no path, nothing hidden.
fn check_screenshot_name(name: &str) -> Result<()> {
    if name.is_empty()
        || name.starts_with('.')
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        bail!(
            "the screenshot name {name:?} is not a plain file name\n\
             hint: use letters, digits, `-`, `_` and `.`, e.g. `project-page`"
        );
    }
    Ok(())
}

fn find_in_path(bin: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(bin))
        .find(|path| path.is_file())
}

/// One HTTP/1.1 request without a body on loopback; the status code.
fn blocking_request(addr: SocketAddr, method: &str, path: &str) -> std::io::Result<u16> {
    let mut stream = TcpStream::connect_timeout(&addr, STOP_TIMEOUT)?;
    stream.set_read_timeout(Some(STOP_TIMEOUT))?;
    stream.set_write_timeout(Some(STOP_TIMEOUT))?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    // chromedriver may keep the connection open despite `Connection: close`: read the
    // head and `Content-Length` bytes of body, not to the end of the stream.
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk)?;
        answer.extend_from_slice(&chunk[..n]);
        if n == 0 || response_complete(&answer) {
            break;
        }
    }
    String::from_utf8_lossy(&answer)
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| std::io::Error::other("not an HTTP response"))
}

/// Whether `answer` holds a whole HTTP response: the head and `Content-Length` bytes
/// (a head without `Content-Length` counts as whole).
fn response_complete(answer: &[u8]) -> bool {
    let Some(end) = answer.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&answer[..end]);
    let length = head
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse::<usize>().ok())
        .unwrap_or(0);
    answer.len() >= end + 4 + length
}

/// The ids of processes whose command line mentions `profile` (Chromium's
/// `--user-data-dir`, unique to one [`Browser`]).
pub fn profile_processes(profile: &Path) -> Vec<u32> {
    let needle = profile.as_os_str().as_encoded_bytes();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != std::process::id())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|cmdline| cmdline.windows(needle.len()).any(|w| w == needle))
        })
        .collect()
}

fn kill_profile_processes(profile: &Path) {
    let deadline = Instant::now() + STOP_TIMEOUT;
    loop {
        let pids = profile_processes(profile);
        if pids.is_empty() || Instant::now() >= deadline {
            for pid in pids {
                let _ = Command::new("sh")
                    .args([
                        "-c",
                        "kill -KILL \"$1\" 2>/dev/null",
                        "sh",
                        &pid.to_string(),
                    ])
                    .status();
            }
            return;
        }
        // Chromium is quitting after the session ended; give it a moment first.
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_is_complete_with_its_head_and_content_length_bytes() {
        assert!(!response_complete(
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
        ));
        assert!(!response_complete(
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabc"
        ));
        assert!(response_complete(
            b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nabcde"
        ));
        assert!(response_complete(b"HTTP/1.1 200 OK\r\nServer: x\r\n\r\n"));
    }

    #[test]
    fn screenshot_names_are_plain_file_names() {
        for good in ["project-page", "step_2.after"] {
            assert!(check_screenshot_name(good).is_ok(), "{good}");
        }
        for bad in ["", "../escape", "a/b", ".hidden", "with space"] {
            let err = check_screenshot_name(bad).unwrap_err().to_string();
            assert!(err.contains("not a plain file name"), "{bad}: {err}");
        }
    }

    #[test]
    fn artifacts_go_under_cargo_target_dir_when_set() {
        let root = workspace_root();
        assert_eq!(
            artifacts_dir_in(None),
            root.join("target").join("e2e-artifacts")
        );
        assert_eq!(
            artifacts_dir_in(Some("".into())),
            root.join("target").join("e2e-artifacts")
        );
        assert_eq!(
            artifacts_dir_in(Some("/tmp/ci-target".into())),
            PathBuf::from("/tmp/ci-target/e2e-artifacts")
        );
        assert_eq!(
            artifacts_dir_in(Some("build".into())),
            root.join("build").join("e2e-artifacts")
        );
    }
}
