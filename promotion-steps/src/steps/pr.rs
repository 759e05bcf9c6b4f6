//! What the pull-request steps (`git-open-pr`, `git-wait-for-pr`, `git-merge-pr`) share:
//! connecting to the forge, the rate-limit answer, durations, and the messages.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::forge::{self, Forge, ForgeError, Provider, PullRequest, UNAVAILABLE_WAIT};
use crate::{StepContext, StepOutcome};

/// How often a step waiting on a pull request looks, unless `pollInterval` says.
pub(crate) const DEFAULT_POLL: Duration = Duration::from_secs(30);
/// How long a step waits on a pull request, unless `timeout` says.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(72 * 3600);

/// A pull request number, as a number or a string (`${{ outputs.open.pr.id }}`).
#[derive(Deserialize, JsonSchema, Debug, Clone)]
#[serde(untagged)]
pub(crate) enum PrNumber {
    /// `42`.
    Number(u64),
    /// `"42"`.
    Text(String),
}

impl PrNumber {
    pub(crate) fn get(&self) -> Result<u64, String> {
        match self {
            PrNumber::Number(n) => Ok(*n),
            PrNumber::Text(s) => s
                .trim()
                .trim_start_matches(['#', '!'])
                .parse()
                .map_err(|_| format!("`prNumber` `{s}` is not a pull request number")),
        }
    }
}

/// Connects to the forge of `repo_url`, with the project's token for it.
pub(crate) async fn connect(
    ctx: &StepContext,
    kind: &str,
    repo_url: &str,
    provider: Option<Provider>,
    api_url: Option<&str>,
) -> Result<Box<dyn Forge>, StepOutcome> {
    let target = forge::target(repo_url, provider, api_url)
        .map_err(|reason| StepOutcome::failed(format!("invalid `{kind}` config: {reason}")))?;
    let token = ctx.credentials.token(repo_url);
    forge::connect(&target, token, &ctx.http)
        .await
        .map_err(|e| forge_error(&e, ctx.saved_state.clone()))
}

/// What `dray apply` can tell of a PR step's forge: a `provider` that is not one, and a
/// forge that cannot be worked out from `repoURL`, `provider` and `apiURL` (an unknown host
/// without `provider`, Bitbucket Server). Fields written as `${{ }}` are not judged.
pub(crate) fn check_forge(config: &Value) -> Vec<crate::ConfigProblem> {
    let literal = |key: &str| match &config[key] {
        Value::Null => Some(None),
        Value::String(s) if s.contains("${{") => None,
        Value::String(s) => Some(Some(s.as_str())),
        _ => None,
    };
    let provider = match literal("provider") {
        Some(Some(name)) => match serde_json::from_value::<Provider>(json!(name)) {
            Ok(p) => Some(Some(p)),
            Err(_) => {
                return vec![crate::ConfigProblem {
                    field: "provider",
                    message: format!("`provider` `{name}` is not a forge Dray speaks"),
                    hint: "use `github`, `gitlab`, `gitea`, `forgejo` or `bitbucket`".into(),
                }];
            }
        },
        Some(None) => Some(None),
        None => None,
    };
    let (Some(Some(repo_url)), Some(provider), Some(api_url)) =
        (literal("repoURL"), provider, literal("apiURL"))
    else {
        return Vec::new();
    };
    match forge::target(repo_url, provider, api_url) {
        Ok(_) => Vec::new(),
        Err(reason) => {
            let (message, hint) = match reason.split_once("; hint: ") {
                Some((message, hint)) => (message.to_string(), hint.to_string()),
                None => (reason, "see docs/steps.md (pull requests)".to_string()),
            };
            vec![crate::ConfigProblem {
                field: if provider.is_some() {
                    "provider"
                } else {
                    "repoURL"
                },
                message,
                hint,
            }]
        }
    }
}

/// The outcome of a forge error: a rate limit is `Running` (saying until when), a refusal
/// `Failed` with the forge's message, anything else `Errored` (retried by the engine).
pub(crate) fn forge_error(e: &ForgeError, state: Option<Value>) -> StepOutcome {
    match e {
        ForgeError::RateLimited { forge, retry_after } => {
            let wait = (*retry_after).max(Duration::from_secs(1));
            StepOutcome::Running {
                retry_after: wait,
                waiting_for: format!("rate limited by {forge}, retrying at {}", at(wait)),
                state,
            }
        }
        ForgeError::Unavailable(message) => StepOutcome::Running {
            retry_after: UNAVAILABLE_WAIT,
            waiting_for: format!(
                "the forge to answer again ({message}); asking again at {}",
                at(UNAVAILABLE_WAIT)
            ),
            state,
        },
        ForgeError::Refused(message)
        | ForgeError::HeadMoved(message)
        | ForgeError::MergedOtherHead(message) => StepOutcome::failed(message.clone()),
        ForgeError::NotFound(message) | ForgeError::Other(message) => {
            StepOutcome::errored(message.clone())
        }
    }
}

/// The time `wait` from now, to the second: `2026-11-29T11:20:05Z`.
pub(crate) fn at(wait: Duration) -> String {
    let now = jiff::Timestamp::now();
    let then = now
        .checked_add(jiff::SignedDuration::try_from(wait).unwrap_or_default())
        .unwrap_or(now);
    then.round(jiff::Unit::Second).unwrap_or(then).to_string()
}

/// The failure of a pull request closed without merging.
pub(crate) fn closed_without_merge(pr: &PullRequest) -> StepOutcome {
    StepOutcome::failed(format!(
        "pull request #{} was closed without merging by {}",
        pr.number,
        pr.closed_by.as_deref().unwrap_or("an unknown user")
    ))
}

/// The pull request as an [`crate::Effect`] names it.
pub(crate) fn pr_ref(pr: &PullRequest) -> crate::PullRequestRef {
    crate::PullRequestRef {
        number: pr.number,
        url: pr.url.clone(),
    }
}

/// `{"pr": {"id": N, "url": U}}` plus `extra`.
pub(crate) fn pr_outputs(pr: &PullRequest, extra: &[(&str, &str)]) -> Map<String, Value> {
    let mut outputs = Map::new();
    outputs.insert("pr".into(), json!({"id": pr.number, "url": pr.url}));
    for (key, value) in extra {
        outputs.insert((*key).into(), Value::String((*value).to_string()));
    }
    outputs
}

/// Reads `30s`, `5m`, `72h`, `1h30m`, `2d` (see [`crate::duration`]).
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    crate::duration::parse(text).map_err(|e| format!("{e} (e.g. `30s`, `5m`, `72h`)"))
}

/// When this step first started waiting (epoch seconds), kept in its state.
pub(crate) fn waiting_since(ctx: &StepContext) -> i64 {
    ctx.saved_state
        .as_ref()
        .and_then(|s| s["since"].as_i64())
        .unwrap_or_else(|| jiff::Timestamp::now().as_second())
}

/// How long the engine lets a pull-request step wait: its own `timeout` (an unreadable one
/// is the step's own error), else [`DEFAULT_TIMEOUT`].
pub(crate) fn own_timeout(timeout: Option<&str>) -> Duration {
    timeout
        .and_then(|t| parse_duration(t).ok())
        .unwrap_or(DEFAULT_TIMEOUT)
}

/// Whether a step that started waiting at `since` has waited longer than `timeout`.
pub(crate) fn timed_out(since: i64, timeout: Duration) -> bool {
    jiff::Timestamp::now().as_second() - since > timeout.as_secs() as i64
}

/// `72h`, `30m`, `45s`.
pub(crate) fn human(d: Duration) -> String {
    let s = d.as_secs();
    if s % 3600 == 0 && s > 0 {
        format!("{}h", s / 3600)
    } else if s % 60 == 0 && s > 0 {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

/// The state a waiting step keeps across runs: when the wait began.
pub(crate) fn since_state(since: i64) -> Option<Value> {
    Some(json!({"since": since}))
}

/// The configuration `git-wait-for-pr` and `git-merge-pr` share: which pull request, and
/// how to wait for it.
pub(crate) struct WaitFor<'a> {
    /// The repository.
    pub(crate) repo_url: &'a str,
    /// The forge, when not inferred from the host.
    pub(crate) provider: Option<Provider>,
    /// The forge's API base URL.
    pub(crate) api_url: Option<&'a str>,
    /// The pull request.
    pub(crate) pr_number: &'a PrNumber,
    /// `pollInterval`.
    pub(crate) poll_interval: Option<&'a str>,
    /// `timeout`.
    pub(crate) timeout: Option<&'a str>,
}

/// What a step that waits on a pull request settles before it decides anything.
pub(crate) struct Waiting {
    /// The pull request's number.
    pub(crate) number: u64,
    /// How often to look.
    pub(crate) poll: Duration,
    /// How long to wait in all.
    pub(crate) timeout: Duration,
    /// When the wait began (kept in the step's state across runs).
    pub(crate) since: i64,
    /// The forge.
    pub(crate) forge: Box<dyn Forge>,
    /// The pull request as the forge sees it now.
    pub(crate) pr: PullRequest,
}

/// The shared start of `git-wait-for-pr` and `git-merge-pr`: parse the number and the
/// durations (a bad value fails the step), note when the wait began, connect, and look the
/// pull request up; a rate limit keeps the wait's start in the state it returns.
pub(crate) async fn start_waiting(
    ctx: &StepContext,
    kind: &str,
    wait: WaitFor<'_>,
) -> Result<Waiting, StepOutcome> {
    let invalid =
        |reason: String| StepOutcome::failed(format!("invalid `{kind}` config: {reason}"));
    let number = wait.pr_number.get().map_err(invalid)?;
    let poll = match wait.poll_interval.map(parse_duration) {
        None => DEFAULT_POLL,
        Some(Ok(d)) if !d.is_zero() => d,
        Some(Ok(_)) => return Err(invalid("`pollInterval` must be more than 0s".into())),
        Some(Err(reason)) => return Err(invalid(reason)),
    };
    let timeout = match wait.timeout.map(parse_duration) {
        None => DEFAULT_TIMEOUT,
        Some(Ok(d)) => d,
        Some(Err(reason)) => return Err(invalid(reason)),
    };
    let since = waiting_since(ctx);
    let forge = match connect(ctx, kind, wait.repo_url, wait.provider, wait.api_url).await {
        Ok(forge) => forge,
        Err(StepOutcome::Running {
            retry_after,
            waiting_for,
            ..
        }) => {
            return Err(StepOutcome::Running {
                retry_after,
                waiting_for,
                state: since_state(since),
            });
        }
        Err(outcome) => return Err(outcome),
    };
    let pr = forge
        .get(number)
        .await
        .map_err(|e| forge_error(&e, since_state(since)))?;
    Ok(Waiting {
        number,
        poll,
        timeout,
        since,
        forge,
        pr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forge_that_cannot_be_known_is_told_before_the_run() {
        let problems = check_forge(&json!({"repoURL": "https://git.example.com/a/b.git",
            "provider": "gittea"}));
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].field, "provider");
        assert_eq!(
            problems[0].message,
            "`provider` `gittea` is not a forge Dray speaks"
        );
        let problems = check_forge(&json!({"repoURL": "https://git.example.com/a/b.git"}));
        assert_eq!(problems[0].field, "repoURL");
        assert!(problems[0].hint.contains("`gitea`"), "{:?}", problems[0]);
        let problems = check_forge(&json!({"repoURL": "https://bitbucket.example.com/a/b.git",
            "provider": "bitbucket"}));
        assert!(
            problems[0].message.contains("Bitbucket Server"),
            "{:?}",
            problems[0]
        );
        // Written as expressions: judged when the step runs.
        assert!(check_forge(&json!({"repoURL": "${{ vars.repo }}"})).is_empty());
        assert!(
            check_forge(&json!({"repoURL": "https://git.example.com/a/b.git",
            "provider": "${{ vars.forge }}"}))
            .is_empty()
        );
        assert!(
            check_forge(&json!({"repoURL": "https://git.example.com/a/b.git",
            "provider": "gitea"}))
            .is_empty()
        );
    }

    #[test]
    fn durations_and_numbers_are_read() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("72h"), Ok(Duration::from_secs(72 * 3600)));
        assert!(parse_duration("30").is_err());
        assert!(parse_duration("soon").is_err());
        assert_eq!(PrNumber::Text("#12".into()).get(), Ok(12));
        assert_eq!(PrNumber::Number(3).get(), Ok(3));
        assert!(PrNumber::Text("x".into()).get().is_err());
    }
}
