//! A git smart-HTTP server: `git http-backend` run as CGI behind a small axum server.
//!
//! Owns the bare repositories under the world's directory, optional basic auth (401 with
//! `WWW-Authenticate` when credentials are missing or wrong), the CGI environment and
//! response parsing, and a record of the requests it served. It runs on its own thread
//! and Tokio runtime, so blocking callers (the git CLI in `git_repo`) cannot starve it.
//! Does not touch working copies: see `git_repo`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::process::{ChildStdin, Command};
use tokio::sync::oneshot;
use tokio_util::io::ReaderStream;

use crate::credentials::Credentials;
use crate::git_repo::git;
use crate::world::TestWorld;

/// The realm in the `WWW-Authenticate` challenge.
const REALM: &str = "dray-e2e git";

/// How to configure a git server.
#[derive(Clone, Debug, Default)]
pub struct GitServerOptions {
    /// Require these credentials for every request (fetch and push).
    pub auth: Option<Credentials>,
}

/// One request the server answered.
#[derive(Clone, Debug)]
pub struct GitRequest {
    /// HTTP method.
    pub method: String,
    /// URL path, e.g. `/cd.git/info/refs`.
    pub path: String,
    /// URL query, e.g. `service=git-upload-pack`.
    pub query: String,
    /// The authenticated user, when auth is on and passed.
    pub user: Option<String>,
    /// The request's `Content-Encoding` (git gzips large requests).
    pub content_encoding: Option<String>,
    /// The response status.
    pub status: u16,
}

/// A running git smart-HTTP server on 127.0.0.1; stopped on drop.
#[derive(Debug)]
pub struct GitServer {
    world: TestWorld,
    root: PathBuf,
    addr: SocketAddr,
    state: Arc<AppState>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[derive(Debug)]
struct AppState {
    root: PathBuf,
    home: PathBuf,
    log: PathBuf,
    auth: Option<Credentials>,
    requests: Mutex<Vec<GitRequest>>,
}

impl GitServer {
    /// Start a server on a free loopback port serving bare repositories from a new
    /// directory in the world.
    pub fn start(world: &TestWorld, options: GitServerOptions) -> Result<Self> {
        let root = world.unique_dir("git")?;
        if let Some(auth) = &options.auth {
            auth.remember();
        }
        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .context("Failed to bind the git server to 127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let state = Arc::new(AppState {
            root: root.join("repos"),
            home: world.home(),
            log: root.join("http-backend.log"),
            auth: options.auth,
            requests: Mutex::new(Vec::new()),
        });
        std::fs::create_dir_all(&state.root)?;
        let app = Router::new()
            .fallback(serve_cgi)
            .with_state(Arc::clone(&state));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("Failed to build the git server's runtime")?;
        let (shutdown, stop) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("git-server-{}", addr.port()))
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(listener) => listener,
                        Err(err) => return eprintln!("git server on {addr}: {err}"),
                    };
                    tokio::select! {
                        result = axum::serve(listener, app) => {
                            if let Err(err) = result {
                                eprintln!("git server on {addr} failed: {err}");
                            }
                        }
                        _ = stop => {}
                    }
                });
                runtime.shutdown_timeout(Duration::from_secs(2));
            })
            .context("Failed to spawn the git server thread")?;
        Ok(Self {
            world: world.clone(),
            root: state.root.clone(),
            addr,
            state,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The credentials the server requires, if any.
    pub fn credentials(&self) -> Option<&Credentials> {
        self.state.auth.as_ref()
    }

    /// Create an empty bare repository `name` (`.git` appended if missing) whose default
    /// branch is `main`; returns its URL without credentials.
    pub fn create_repo(&self, name: &str) -> Result<String> {
        let path = self.repo_path(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let output = git(&self.world)
            .args(["init", "--quiet", "--bare", "--initial-branch=main"])
            .arg(&path)
            .output()
            .context("Failed to run `git init --bare`")?;
        if !output.status.success() {
            bail!(
                "Failed to create the bare repository `{}`: {}",
                path.display(),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(self.url(name))
    }

    /// The repository's URL without credentials: `http://127.0.0.1:PORT/NAME.git`.
    pub fn url(&self, name: &str) -> String {
        format!("{}/{}", self.base_url(), repo_name(name))
    }

    /// The repository's URL with the server's credentials embedded (test side only);
    /// the plain URL when the server has no auth.
    pub fn url_with_credentials(&self, name: &str) -> String {
        match self.credentials() {
            Some(creds) => url_with(&self.url(name), creds),
            None => self.url(name),
        }
    }

    /// The bare repository's directory on disk.
    pub fn repo_path(&self, name: &str) -> PathBuf {
        self.root.join(repo_name(name))
    }

    /// Install an executable server-side hook (e.g. `pre-receive` that exits 1 to reject
    /// pushes) into repository `name`.
    pub fn install_hook(&self, name: &str, hook: &str, script: &str) -> Result<()> {
        use std::os::unix::fs::PermissionsExt as _;
        let path = self.repo_path(name).join("hooks").join(hook);
        std::fs::write(&path, script)
            .with_context(|| format!("Failed to write the hook `{}`", path.display()))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        Ok(())
    }

    /// The requests served so far, oldest first.
    pub fn requests(&self) -> Vec<GitRequest> {
        self.state
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// What `git http-backend` wrote to stderr.
    pub fn log(&self) -> String {
        crate::process::read_lossy(&self.state.log)
    }
}

impl Drop for GitServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// `name` with a `.git` suffix.
fn repo_name(name: &str) -> String {
    let name = name.trim_matches('/');
    if name.ends_with(".git") {
        name.to_owned()
    } else {
        format!("{name}.git")
    }
}

/// `url` with `creds` as its user info (percent-encoded).
pub(crate) fn url_with(url: &str, creds: &Credentials) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut parsed) => {
            let _ = parsed.set_username(&creds.username);
            let _ = parsed.set_password(Some(&creds.password));
            parsed.to_string()
        }
        Err(_) => url.to_owned(),
    }
}

/// The only handler: authenticate, then run `git http-backend` for the request.
async fn serve_cgi(State(state): State<Arc<AppState>>, request: Request) -> Response {
    let mut record = GitRequest {
        method: request.method().to_string(),
        path: request.uri().path().to_owned(),
        query: request.uri().query().unwrap_or_default().to_owned(),
        user: None,
        content_encoding: header_str(request.headers(), header::CONTENT_ENCODING),
        status: 0,
    };
    let authorization = header_str(request.headers(), header::AUTHORIZATION);
    let response = match &state.auth {
        Some(creds) if !authorization.is_some_and(|h| creds.matches_header(&h)) => unauthorized(),
        auth => {
            record.user = auth.as_ref().map(|c| c.username.clone());
            match run_backend(&state, request, record.user.as_deref()).await {
                Ok(response) => response,
                Err(err) => {
                    let message = format!("git http-backend failed: {err:#}\n");
                    append_log(&state.log, &message);
                    (StatusCode::INTERNAL_SERVER_ERROR, message).into_response()
                }
            }
        }
    };
    record.status = response.status().as_u16();
    state
        .requests
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(record);
    response
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

fn unauthorized() -> Response {
    let challenge = format!("Basic realm=\"{REALM}\"");
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, challenge)],
        "Unauthorized\n",
    )
        .into_response()
}

/// Run the CGI: stream the request body to its stdin, parse its headers, stream the rest.
async fn run_backend(state: &AppState, request: Request, user: Option<&str>) -> Result<Response> {
    let (parts, body) = request.into_parts();
    let mut cmd = Command::new("git");
    cmd.arg("http-backend").env_clear();
    cgi_env(&mut cmd, state, &parts.headers);
    cmd.env("REQUEST_METHOD", parts.method.as_str())
        .env("PATH_INFO", parts.uri.path())
        .env("QUERY_STRING", parts.uri.query().unwrap_or_default());
    if let Some(user) = user {
        cmd.env("REMOTE_USER", user);
    }
    let stderr = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&state.log)?;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(stderr))
        .kill_on_drop(true)
        .spawn()
        .context("Failed to start `git http-backend`")?;
    let stdin = child.stdin.take().context("no stdin")?;
    let stdout = child.stdout.take().context("no stdout")?;
    tokio::spawn(feed(body, stdin));
    tokio::spawn(async move {
        let _ = child.wait().await;
    });

    let mut reader = BufReader::new(stdout);
    let mut response = Response::builder().status(StatusCode::OK);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).await? == 0 {
            bail!("`git http-backend` ended before its headers did");
        }
        let line = line.trim_end_matches(['\r', '\n']);
        if line.is_empty() {
            break;
        }
        let (name, value) = line
            .split_once(':')
            .with_context(|| format!("bad CGI header line {line:?}"))?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("Status") {
            let code = value.split_whitespace().next().unwrap_or_default();
            response = response.status(
                code.parse::<u16>()
                    .with_context(|| format!("bad CGI status {value:?}"))?,
            );
        } else {
            response = response.header(name, value);
        }
    }
    Ok(response.body(Body::from_stream(ReaderStream::new(reader)))?)
}

/// The CGI environment shared by every request (plus request headers git reads).
fn cgi_env(cmd: &mut Command, state: &AppState, headers: &HeaderMap) {
    cmd.env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &state.home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_PROJECT_ROOT", &state.root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("GIT_CONFIG_COUNT", "2")
        .env("GIT_CONFIG_KEY_0", "http.receivepack")
        .env("GIT_CONFIG_VALUE_0", "true")
        // Forges let clients fetch any reachable commit by id.
        .env("GIT_CONFIG_KEY_1", "uploadpack.allowReachableSHA1InWant")
        .env("GIT_CONFIG_VALUE_1", "true")
        .env("GATEWAY_INTERFACE", "CGI/1.1")
        .env("SERVER_PROTOCOL", "HTTP/1.1")
        .env("REMOTE_ADDR", "127.0.0.1");
    let pass = [
        (header::CONTENT_TYPE.as_str(), "CONTENT_TYPE"),
        (header::CONTENT_LENGTH.as_str(), "CONTENT_LENGTH"),
        (header::CONTENT_ENCODING.as_str(), "HTTP_CONTENT_ENCODING"),
        ("git-protocol", "HTTP_GIT_PROTOCOL"),
    ];
    for (name, var) in pass {
        if let Some(value) = headers.get(name).and_then(|v| v.to_str().ok()) {
            cmd.env(var, value);
        }
    }
}

/// Copy the request body into the CGI's stdin, then close it.
async fn feed(body: Body, mut stdin: ChildStdin) {
    let mut stream = body.into_data_stream();
    while let Some(Ok(chunk)) = stream.next().await {
        if stdin.write_all(&chunk).await.is_err() {
            break;
        }
    }
    let _ = stdin.shutdown().await;
}

fn append_log(path: &Path, message: &str) {
    use std::io::Write as _;
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = file.write_all(message.as_bytes());
    }
}
