//! Freight creation criteria: which combination of discovered artifacts is the candidate
//! for minting ([`newest`]: the newest artifact of every subscription, as Kargo takes
//! them), and whether the Warehouse's `freightCreationCriteria.expression` lets it be
//! minted ([`decide`]).
//!
//! Only the newest combination is judged: when it is refused no older one is tried (that
//! would mint Freight older than what the subscriptions already show). The verdict is
//! the `FreightCreationCriteriaSatisfied` condition on the Warehouse, whose message says
//! which expression refused which artifacts and why. Minting and the policy
//! (`Automatic`/`Manual`) are the controller's; the expression machinery is
//! [`crate::expr`]'s.

use crate::api::{
    Condition, FreightChart, FreightCommit, FreightCreationCriteria, FreightImage,
    SubscriptionKind, SubscriptionStatus, Time,
};
use crate::expr::exprlang::ExprLanguage;
use crate::expr::{FreightView, PredicateCache, Verdict};

/// The condition type that carries the criteria's verdict.
pub use crate::api::CRITERIA_CONDITION as CONDITION;

/// A combination of artifacts that may become Freight.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Candidate {
    /// One image per image subscription.
    pub images: Vec<FreightImage>,
    /// One commit per git subscription.
    pub commits: Vec<FreightCommit>,
    /// One chart version per chart subscription.
    pub charts: Vec<FreightChart>,
}

impl Candidate {
    /// The artifacts as `imageFrom()`, `commitFrom()` and `chartFrom()` see them.
    fn view(&self) -> FreightView {
        FreightView {
            images: self.images.clone(),
            commits: self.commits.clone(),
            charts: self.charts.clone(),
            ..FreightView::default()
        }
    }

    /// `reg/app:1.2.0, https://git/cfg.git@1a2b3c4` for messages.
    pub fn describe(&self) -> String {
        let images = self
            .images
            .iter()
            .map(|i| format!("{}:{}", i.repo_url, i.tag));
        let commits = self.commits.iter().map(|c| {
            let short = &c.id[..c.id.len().min(7)];
            match &c.tag {
                Some(tag) => format!("{}@{short} ({tag})", c.repo_url),
                None => format!("{}@{short}", c.repo_url),
            }
        });
        let charts = self
            .charts
            .iter()
            .map(|c| format!("{}/{}:{}", c.repo_url, c.name, c.version));
        images
            .chain(commits)
            .chain(charts)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The newest artifact of every subscription; `None` when one found nothing.
pub fn newest(subscriptions: &[SubscriptionStatus]) -> Option<Candidate> {
    let mut candidate = Candidate::default();
    for sub in subscriptions {
        match sub.kind {
            SubscriptionKind::Image => {
                let newest = sub.images.first()?;
                candidate.images.push(FreightImage {
                    repo_url: sub.repo_url.clone(),
                    tag: newest.tag.clone(),
                    digest: newest.digest.clone(),
                    created_at: newest.created_at.clone(),
                    source: newest.source.clone(),
                    revision: newest.revision.clone(),
                });
            }
            SubscriptionKind::Git => {
                let newest = sub.commits.first()?;
                candidate.commits.push(FreightCommit {
                    repo_url: sub.repo_url.clone(),
                    id: newest.id.clone(),
                    branch: newest.branch.clone(),
                    tag: newest.tag.clone(),
                    message: newest.message.clone(),
                    author: newest.author.clone(),
                });
            }
            SubscriptionKind::Chart => {
                let highest = sub.charts.first()?;
                candidate.charts.push(FreightChart {
                    repo_url: sub.repo_url.clone(),
                    name: highest.name.clone(),
                    version: highest.version.clone(),
                    digest: highest.digest.clone(),
                });
            }
            SubscriptionKind::Unknown => return None,
        }
    }
    Some(candidate)
}

/// What the criteria say about a candidate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// No criteria: every candidate may be minted.
    NoCriteria,
    /// The expression is true.
    Satisfied,
    /// The expression is false: the message names it, the artifacts and why (the
    /// condition adds what to do).
    Refused(String),
    /// The expression could not be evaluated (it errs, or is not a bool).
    Failed(String),
}

impl Decision {
    /// Whether the candidate may be minted automatically.
    pub fn allows(&self) -> bool {
        matches!(self, Decision::NoCriteria | Decision::Satisfied)
    }

    /// The `FreightCreationCriteriaSatisfied` condition; none without criteria.
    pub fn condition(&self, generation: Option<i64>) -> Option<Condition> {
        let (status, reason, message) = match self {
            Decision::NoCriteria => return None,
            Decision::Satisfied => (
                "True",
                "CriteriaSatisfied",
                "the newest artifacts satisfy freightCreationCriteria".to_owned(),
            ),
            Decision::Refused(message) => (
                "False",
                "CriteriaNotSatisfied",
                format!(
                    "{message}; hint: wait for artifacts that satisfy it, or mint these by \
                     hand with `dray freight create --warehouse <name> --newest`"
                ),
            ),
            Decision::Failed(message) => (
                "False",
                "CriteriaEvaluationFailed",
                format!(
                    "{message}; hint: fix spec.freightCreationCriteria.expression and \
                     `dray apply` the Warehouse"
                ),
            ),
        };
        Some(Condition {
            type_: CONDITION.into(),
            status: status.into(),
            reason: reason.into(),
            message,
            last_transition_time: Some(Time(jiff::Timestamp::now())),
            observed_generation: generation,
        })
    }
}

/// Judges `candidate` by `criteria`, written in `language` (none, or a blank expression,
/// allow everything).
pub fn decide(
    criteria: Option<&FreightCreationCriteria>,
    language: ExprLanguage,
    candidate: &Candidate,
) -> Decision {
    let Some(expression) = criteria
        .map(|c| c.expression.trim())
        .filter(|e| !e.is_empty())
    else {
        return Decision::NoCriteria;
    };
    let verdict = PredicateCache::new(language).evaluate(
        expression,
        &serde_json::Map::new(),
        &candidate.view(),
    );
    match verdict {
        Ok(Verdict::Accepted) => Decision::Satisfied,
        Ok(Verdict::Refused(why)) => Decision::Refused(format!(
            "freightCreationCriteria refused {}: {why}",
            candidate.describe()
        )),
        Err(error) => Decision::Failed(format!(
            "freightCreationCriteria could not be evaluated over {}: {error}",
            candidate.describe()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{DiscoveredCommitRef, DiscoveredImageRef};

    fn subscriptions(image_tags: &[&str], commit_tags: &[&str]) -> Vec<SubscriptionStatus> {
        vec![
            SubscriptionStatus {
                repo_url: "reg/app".into(),
                kind: SubscriptionKind::Image,
                ready: true,
                images: image_tags
                    .iter()
                    .map(|t| DiscoveredImageRef {
                        tag: (*t).into(),
                        digest: format!("sha256:{t}"),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            },
            SubscriptionStatus {
                repo_url: "https://git/cfg.git".into(),
                kind: SubscriptionKind::Git,
                ready: true,
                commits: commit_tags
                    .iter()
                    .map(|t| DiscoveredCommitRef {
                        id: "0123456789abcdef0123456789abcdef01234567".into(),
                        tag: Some((*t).into()),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            },
        ]
    }

    fn criteria(expression: &str) -> FreightCreationCriteria {
        FreightCreationCriteria {
            expression: expression.into(),
        }
    }

    const SAME_TAG: &str = "imageFrom('reg/app').tag == commitFrom('https://git/cfg.git').tag";

    #[test]
    fn the_candidate_is_the_newest_of_each_subscription() {
        let candidate = newest(&subscriptions(&["v2", "v1"], &["v1"])).unwrap();
        assert_eq!(candidate.images[0].tag, "v2");
        assert_eq!(candidate.commits[0].tag.as_deref(), Some("v1"));
        assert_eq!(
            candidate.describe(),
            "reg/app:v2, https://git/cfg.git@0123456 (v1)"
        );
        assert!(newest(&subscriptions(&[], &["v1"])).is_none());
    }

    #[test]
    fn a_kargo_warehouse_judges_in_expr_lang_with_kargo_field_names() {
        let kargo = "imageFrom('reg/app').Tag == commitFrom('https://git/cfg.git').Tag";
        let lang = ExprLanguage::ExprLang;
        let matching = newest(&subscriptions(&["v1"], &["v1"])).unwrap();
        assert_eq!(
            decide(Some(&criteria(kargo)), lang, &matching),
            Decision::Satisfied
        );
        let newer = newest(&subscriptions(&["v2"], &["v1"])).unwrap();
        let Decision::Refused(why) = decide(Some(&criteria(kargo)), lang, &newer) else {
            panic!("v2 against v1 is refused");
        };
        assert!(why.ends_with(&format!("`{kargo}` is false")), "{why}");
    }

    #[test]
    fn a_refusal_names_the_artifacts_and_why() {
        let candidate = newest(&subscriptions(&["v2", "v1"], &["v1"])).unwrap();
        let decision = decide(Some(&criteria(SAME_TAG)), ExprLanguage::Cel, &candidate);
        assert!(!decision.allows());
        let condition = decision.condition(Some(3)).unwrap();
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            ("False", "CriteriaNotSatisfied")
        );
        assert!(
            condition.message.starts_with(
                "freightCreationCriteria refused reg/app:v2, https://git/cfg.git@0123456 (v1): \
                 `imageFrom('reg/app').tag == commitFrom('https://git/cfg.git').tag` is false: \
                 `imageFrom('reg/app').tag` is \"v2\""
            ),
            "{}",
            condition.message
        );
        let matching = newest(&subscriptions(&["v1"], &["v1"])).unwrap();
        assert_eq!(
            decide(Some(&criteria(SAME_TAG)), ExprLanguage::Cel, &matching),
            Decision::Satisfied
        );
    }

    #[test]
    fn charts_are_in_the_candidate_and_chart_from_sees_them() {
        let mut subs = subscriptions(&["1.4.0"], &["v1"]);
        subs.push(SubscriptionStatus {
            repo_url: "oci://reg/charts/app".into(),
            kind: SubscriptionKind::Chart,
            ready: true,
            charts: ["1.4.0", "1.3.0"]
                .iter()
                .map(|v| crate::api::DiscoveredChartRef {
                    name: "app".into(),
                    version: (*v).into(),
                    digest: Some(format!("sha256:{v}")),
                })
                .collect(),
            ..Default::default()
        });
        let candidate = newest(&subs).unwrap();
        assert_eq!(candidate.charts[0].version, "1.4.0");
        let same = "imageFrom('reg/app').tag == chartFrom('oci://reg/charts/app').version";
        assert_eq!(
            decide(Some(&criteria(same)), ExprLanguage::Cel, &candidate),
            Decision::Satisfied
        );
        subs[2].charts.remove(0);
        let older = newest(&subs).unwrap();
        let Decision::Refused(why) = decide(Some(&criteria(same)), ExprLanguage::Cel, &older)
        else {
            panic!("expected a refusal");
        };
        assert!(why.contains("oci://reg/charts/app/app:1.3.0"), "{why}");
        assert!(
            why.contains("is \"1.4.0\"") && why.contains("is \"1.3.0\""),
            "{why}"
        );
    }

    #[test]
    fn no_criteria_allow_everything_and_errors_refuse() {
        let candidate = newest(&subscriptions(&["v2"], &["v1"])).unwrap();
        assert_eq!(
            decide(None, ExprLanguage::Cel, &candidate),
            Decision::NoCriteria
        );
        assert_eq!(
            decide(Some(&criteria("  ")), ExprLanguage::Cel, &candidate),
            Decision::NoCriteria
        );
        assert!(Decision::NoCriteria.condition(None).is_none());
        let decision = decide(
            Some(&criteria("imageFrom('reg/gone').tag == ''")),
            ExprLanguage::Cel,
            &candidate,
        );
        let Decision::Failed(message) = &decision else {
            panic!("{decision:?}")
        };
        assert!(!decision.allows());
        assert!(message.contains("no image from `reg/gone`"), "{message}");
        assert_eq!(
            decision.condition(None).unwrap().reason,
            "CriteriaEvaluationFailed"
        );
    }
}
