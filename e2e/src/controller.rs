//! `dray controller` as a child process against a Kubernetes API (the e2e double): its
//! kubeconfig, data directory, health port, Lease identity and log; start, SIGKILL, stop.
//! Like [`crate::Dray`], it never builds the binary (see [`crate::Dray::binary`]).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use crate::Dray;
use crate::process::{READY_TIMEOUT, Service, http_get};
use crate::world::{TestWorld, free_port, loopback};

/// How `dray controller` is started.
#[derive(Clone, Debug)]
pub struct ControllerOptions {
    /// The kubeconfig it uses.
    pub kubeconfig: PathBuf,
    /// Its identity in the Lease.
    pub identity: String,
    /// The Lease's duration in seconds.
    pub lease_duration: u64,
    /// Extra arguments.
    pub args: Vec<String>,
    /// Extra environment variables (test hooks).
    pub env: Vec<(String, String)>,
}

/// A `dray controller` process; killed on drop.
#[derive(Debug)]
pub struct DrayController {
    world: TestWorld,
    dir: PathBuf,
    port: u16,
    options: ControllerOptions,
    service: Option<Service>,
}

impl DrayController {
    /// Starts it with a fresh data directory and waits for `/healthz`.
    pub fn start(world: &TestWorld, options: ControllerOptions) -> Result<Self> {
        let dir = world.unique_dir(&format!("controller-{}", options.identity))?;
        std::fs::create_dir_all(dir.join("data"))?;
        let mut controller = DrayController {
            world: world.clone(),
            dir,
            port: free_port()?,
            options,
            service: None,
        };
        controller.restart()?;
        Ok(controller)
    }

    /// Starts it again (on the same data directory) after a kill.
    pub fn restart(&mut self) -> Result<()> {
        self.kill9()?;
        let bin = Dray::binary();
        let mut cmd = Command::new(&bin);
        cmd.arg("controller")
            .arg("--kubeconfig")
            .arg(&self.options.kubeconfig)
            .arg("--data-dir")
            .arg(self.dir.join("data"))
            .arg("--lease-namespace")
            .arg("dray")
            .arg("--identity")
            .arg(&self.options.identity)
            .arg("--lease-duration")
            .arg(self.options.lease_duration.to_string())
            .arg("--health-listen")
            .arg(loopback(self.port).to_string())
            .args(&self.options.args)
            .current_dir(&self.dir)
            .env("HOME", self.world.home())
            .env("GIT_TERMINAL_PROMPT", "0")
            .env_remove("POD_NAME")
            .env_remove("POD_NAMESPACE")
            .envs(self.options.env.iter().map(|(k, v)| (k, v)));
        let mut service = Service::spawn(
            &format!("{} controller", bin.display()),
            &mut cmd,
            &self.log_path(),
        )?;
        service.wait_http(loopback(self.port), "/healthz", |s| s == 200, READY_TIMEOUT)?;
        self.service = Some(service);
        Ok(())
    }

    /// What `/readyz` says: `starting`, `standby` or `leading`.
    pub fn phase(&self) -> Result<String> {
        let (_, body) = http_get(loopback(self.port), "/readyz", "")?;
        Ok(body.trim().to_owned())
    }

    /// Waits (at most `timeout`) until `/readyz` says `phase`.
    pub fn wait_for_phase(&mut self, phase: &str, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if !self.is_running() {
                bail!(
                    "`dray controller` {} exited while waiting to be `{phase}`:\n{}",
                    self.options.identity,
                    self.log()
                );
            }
            if self.phase().is_ok_and(|p| p == phase) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "`dray controller` {} was not `{phase}` within {}s (it says {:?}):\n{}",
                    self.options.identity,
                    timeout.as_secs(),
                    self.phase().ok(),
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Whether the process runs.
    pub fn is_running(&mut self) -> bool {
        self.service.as_mut().is_some_and(Service::is_running)
    }

    /// SIGKILL.
    pub fn kill9(&mut self) -> Result<()> {
        if let Some(mut service) = self.service.take() {
            service.kill9()?;
        }
        Ok(())
    }

    /// SIGTERM, then SIGKILL after `timeout`; the exit status when it exited by itself.
    pub fn stop(&mut self, timeout: Duration) -> Result<Option<ExitStatus>> {
        match self.service.take() {
            Some(mut service) => service.terminate(timeout),
            None => Ok(None),
        }
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("controller.log")
    }

    /// Its data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// The directory it runs in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for DrayController {
    fn drop(&mut self) {
        let _ = self.kill9();
    }
}
