//! A real OCI registry: Debian's `docker-registry` (CNCF distribution 2.8) on loopback.
//!
//! Owns the registry's config file, storage directory, optional htpasswd file and the
//! process (`stop` and `restart` keep port and storage). Does not push images: see `oci`.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result};

use crate::credentials::Credentials;
use crate::process::{READY_TIMEOUT, Service};
use crate::world::{TestWorld, free_port, loopback};

/// The registry binary (Debian package `docker-registry`).
pub const REGISTRY_BIN: &str = "docker-registry";

/// Where the registry sends its push notifications (distribution `notifications`).
#[derive(Clone, Debug)]
pub struct Notifications {
    /// The webhook URL, e.g. Dray's registry webhook.
    pub url: String,
    /// Sent as `Authorization: Bearer <token>` when set.
    pub bearer_token: Option<String>,
    /// Event actions the registry must not send (e.g. `pull`).
    pub ignored_actions: Vec<String>,
}

impl Notifications {
    /// Notify `url` of every event, with no token.
    pub fn to(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            bearer_token: None,
            ignored_actions: Vec::new(),
        }
    }
}

/// How to configure a registry.
#[derive(Clone, Debug, Default)]
pub struct RegistryOptions {
    /// Require these credentials (htpasswd basic auth) for every request.
    pub auth: Option<Credentials>,
    /// Send push/pull notifications to a webhook.
    pub notifications: Option<Notifications>,
}

/// A running (or stopped) `docker-registry serve` on 127.0.0.1; killed on drop.
#[derive(Debug)]
pub struct Registry {
    _world: TestWorld,
    dir: PathBuf,
    port: u16,
    options: RegistryOptions,
    service: Option<Service>,
}

impl Registry {
    /// Start a registry on a free port with storage under the world's directory, and wait
    /// until `GET /v2/` answers.
    pub fn start(world: &TestWorld, options: RegistryOptions) -> Result<Self> {
        let dir = world.unique_dir("registry")?;
        if let Some(auth) = &options.auth {
            auth.remember();
        }
        if let Some(token) = options
            .notifications
            .as_ref()
            .and_then(|n| n.bearer_token.as_ref())
        {
            crate::secrets::remember("the registry's notification bearer token", token);
        }
        let mut registry = Self {
            _world: world.clone(),
            dir,
            port: 0,
            options,
            service: None,
        };
        // The port is free when picked but another process may grab it before the
        // registry binds it: retry a few times with a new port.
        let mut attempt = 0;
        loop {
            attempt += 1;
            registry.port = free_port()?;
            match registry.restart() {
                Ok(()) => return Ok(registry),
                Err(err) if attempt < 3 && registry.log().contains("address already in use") => {
                    eprintln!("registry port clash, retrying: {err:#}");
                }
                Err(err) => return Err(err),
            }
        }
    }

    /// `127.0.0.1:PORT`, the registry part of an image reference.
    pub fn host(&self) -> String {
        loopback(self.port).to_string()
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.host())
    }

    /// The port, kept across `stop`/`restart`.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:PORT/REPO:TAG`.
    pub fn image(&self, repo: &str, tag: &str) -> String {
        format!("{}/{repo}:{tag}", self.host())
    }

    /// The credentials the registry requires, if any.
    pub fn credentials(&self) -> Option<&Credentials> {
        self.options.auth.as_ref()
    }

    /// The registry's storage root.
    pub fn storage_dir(&self) -> PathBuf {
        self.dir.join("storage")
    }

    /// Everything the registry printed, across restarts.
    pub fn log(&self) -> String {
        crate::process::read_lossy(&self.dir.join("registry.log"))
    }

    /// Whether the registry process is running.
    pub fn is_running(&mut self) -> bool {
        self.service.as_mut().is_some_and(Service::is_running)
    }

    /// Kill the registry (SIGKILL); its port then refuses connections.
    pub fn stop(&mut self) -> Result<()> {
        if let Some(mut service) = self.service.take() {
            service.kill9()?;
        }
        Ok(())
    }

    /// Start the registry again on the same port and storage (stopping it first if it
    /// runs), and wait until it answers.
    pub fn restart(&mut self) -> Result<()> {
        self.stop()?;
        let config = self.write_config()?;
        let mut cmd = Command::new(REGISTRY_BIN);
        cmd.arg("serve").arg(&config).current_dir(&self.dir);
        let log = self.dir.join("registry.log");
        let mut service = Service::spawn(REGISTRY_BIN, &mut cmd, &log).with_context(|| {
            format!("`{REGISTRY_BIN}` is not runnable; hint: `apt-get install -y {REGISTRY_BIN}` or run e2e/test.sh")
        })?;
        // 401 means ready too: the registry answers, it wants credentials.
        service.wait_http(
            loopback(self.port),
            "/v2/",
            |s| s == 200 || s == 401,
            READY_TIMEOUT,
        )?;
        self.service = Some(service);
        Ok(())
    }

    /// Write `config.yml` (and `htpasswd`) for the current port and options.
    fn write_config(&self) -> Result<PathBuf> {
        let storage = self.storage_dir();
        std::fs::create_dir_all(&storage)?;
        let mut yaml = format!(
            "version: 0.1\n\
             log:\n  level: info\n  formatter: text\n  accesslog:\n    disabled: true\n\
             storage:\n  filesystem:\n    rootdirectory: {storage}\n  delete:\n    enabled: true\n\
             \x20 maintenance:\n    uploadpurging:\n      enabled: false\n\
             http:\n  addr: {addr}\n  secret: dray-e2e-not-a-secret\n",
            storage = quoted(&storage.display().to_string()),
            addr = loopback(self.port),
        );
        if let Some(creds) = &self.options.auth {
            let htpasswd = self.dir.join("htpasswd");
            std::fs::write(&htpasswd, creds.htpasswd_line()?)?;
            let path = quoted(&htpasswd.display().to_string());
            write!(
                yaml,
                "auth:\n  htpasswd:\n    realm: dray-e2e\n    path: {path}\n"
            )?;
        }
        if let Some(n) = &self.options.notifications {
            write!(
                yaml,
                "notifications:\n  events:\n    includereferences: true\n  endpoints:\n\
                 \x20   - name: dray-e2e\n      url: {url}\n      timeout: 2s\n      threshold: 3\n\
                 \x20     backoff: 1s\n",
                url = quoted(&n.url)
            )?;
            if let Some(token) = &n.bearer_token {
                let value = quoted(&format!("Bearer {token}"));
                write!(yaml, "      headers:\n        Authorization: [{value}]\n")?;
            }
            if !n.ignored_actions.is_empty() {
                let actions: Vec<String> = n.ignored_actions.iter().map(|a| quoted(a)).collect();
                write!(
                    yaml,
                    "      ignore:\n        actions: [{}]\n",
                    actions.join(", ")
                )?;
            }
        }
        let path = self.dir.join("config.yml");
        std::fs::write(&path, yaml)
            .with_context(|| format!("Failed to write `{}`", path.display()))?;
        Ok(path)
    }
}

/// A YAML double-quoted scalar (JSON strings are valid YAML).
fn quoted(value: &str) -> String {
    serde_json::Value::from(value).to_string()
}
