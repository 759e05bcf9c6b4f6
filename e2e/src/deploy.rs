//! The deploy-and-verify pipeline as a test fixture: the quickstart's services
//! ([`Pipeline`]), an Argo CD double serving `shop-dev` on `stage/dev` (authorised for
//! `demo:dev`), a Prometheus double answering the success-rate query with 0.99, and a
//! project where `dev` renders, pushes, syncs `shop-dev` with `argocd-update`, holds health
//! for 1s and runs a success-rate AnalysisTemplate (2 measurements, `failureLimit: 1`),
//! while `staging` takes Freight verified in `dev`.

use std::ops::Deref;
use std::time::Duration;

use anyhow::{Result, bail};
use serde_json::Value;

use crate::argocd::{AppSpec, ArgoCd};
use crate::pipeline::Pipeline;
use crate::prometheus::Prometheus;

/// The Argo CD double's token (the project has a Credential with it).
pub const ARGOCD_TOKEN: &str = "argocd-e2e-token";

/// The query the success-rate metric sends for `dev`, as the Prometheus double sees it.
pub const QUERY: &str = r#"sum(rate(http_requests_total{service="shop-dev",code!~"5.."}[1m])) / sum(rate(http_requests_total{service="shop-dev"}[1m]))"#;

/// What differs between the suites that use the fixture.
#[derive(Clone, Debug)]
pub struct DeployOptions {
    /// `dev`'s `queuePolicy`.
    pub queue_policy: &'static str,
    /// `dev`'s `health.timeout`.
    pub health_timeout: &'static str,
    /// The `argocd-update` step's `retry.timeout`.
    pub sync_timeout: &'static str,
}

impl Default for DeployOptions {
    fn default() -> Self {
        DeployOptions {
            queue_policy: "Supersede",
            health_timeout: "4s",
            sync_timeout: "1m",
        }
    }
}

/// The running fixture; derefs to its [`Pipeline`].
pub struct Deploy {
    /// The quickstart's services and CLI.
    pub p: Pipeline,
    /// The Argo CD double.
    pub argocd: ArgoCd,
    /// The Prometheus double.
    pub prometheus: Prometheus,
}

impl Deref for Deploy {
    type Target = Pipeline;

    fn deref(&self) -> &Pipeline {
        &self.p
    }
}

/// The project's YAML beyond the quickstart's base files.
fn project(d: &Deploy, options: &DeployOptions) -> String {
    format!(
        r#"apiVersion: dray.dev/v1alpha1
kind: Credential
metadata: {{name: argocd, namespace: demo}}
spec: {{type: argocd, repoURL: "{api}", token: {ARGOCD_TOKEN}}}
---
apiVersion: dray.dev/v1alpha1
kind: AnalysisTemplate
metadata: {{name: success-rate, namespace: demo}}
spec:
  args:
    - name: service
  metrics:
    - name: success-rate
      interval: 300ms
      count: 2
      successCondition: result[0] >= 0.95
      failureLimit: 1
      provider:
        prometheus:
          address: "{prom}"
          query: 'sum(rate(http_requests_total{{service="{{{{args.service}}}}",code!~"5.."}}[1m])) / sum(rate(http_requests_total{{service="{{{{args.service}}}}"}}[1m]))'
---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {{name: dev, namespace: demo}}
spec:
  queuePolicy: {queue_policy}
  requestedFreight:
    - origin: {{kind: Warehouse, name: app}}
      sources: {{direct: true}}
  health:
    stabilizationWindow: 1s
    timeout: {health_timeout}
  verification:
    analysisTemplates: [{{name: success-rate}}]
    args:
      - name: service
        value: shop-${{{{ ctx.stage }}}}
  promotionTemplate:
    spec:
      steps:
        - task: {{name: render-to-stage-branch}}
          as: render
          vars:
            - {{name: repoURL, value: "{config_url}"}}
            - {{name: imageRepo, value: "{registry}/demo/app"}}
        - uses: argocd-update
          as: deploy
          retry: {{timeout: {sync_timeout}}}
          config:
            apiServer: "{api}"
            pollInterval: 200ms
            apps:
              - name: shop-dev
                sources:
                  - repoURL: "{config_url}"
                    desiredRevision: ${{{{ outputs["render::push"].commit }}}}
---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {{name: staging, namespace: demo}}
spec:
  requestedFreight:
    - origin: {{kind: Warehouse, name: app}}
      sources: {{stages: [dev]}}
{staging_template}"#,
        api = d.argocd.base_url(),
        prom = d.prometheus.url(),
        registry = d.p.registry.host(),
        config_url = d.p.config_url,
        queue_policy = options.queue_policy,
        health_timeout = options.health_timeout,
        sync_timeout = options.sync_timeout,
        staging_template = d.p.render_template(),
    )
}

impl Deploy {
    /// Starts the services and doubles and applies the project.
    pub fn start(options: DeployOptions) -> Result<Self> {
        let p = Pipeline::start()?;
        let argocd = ArgoCd::start(&p.world, ARGOCD_TOKEN, "ops")?;
        argocd.add_app(&AppSpec::new(
            "shop-dev",
            &p.config_url,
            "stage/dev",
            Some("demo:dev"),
        ));
        let prometheus = Prometheus::start(&p.world)?;
        prometheus.set_value(QUERY, 0.99);
        let d = Deploy {
            p,
            argocd,
            prometheus,
        };
        d.p.apply_base()?;
        d.p.apply(&project(&d, &options))?;
        Ok(d)
    }

    /// Waits (at most 60s) until the verification of `freight` in `dev` has ended; returns
    /// the run.
    pub fn verification_of(&self, freight: &str) -> Result<Value> {
        for _ in 0..600 {
            let stage = self.p.stage("dev")?;
            let run = &stage["status"]["verification"];
            if run["freight"] == freight
                && !matches!(run["phase"].as_str(), Some("Pending" | "Running") | None)
            {
                return Ok(run.clone());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        bail!(
            "the verification of `{freight}` in dev did not end within 60s: {:#}",
            self.p.stage("dev")?["status"]
        )
    }
}
