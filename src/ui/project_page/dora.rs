//! The project page's DORA panel: for each Stage, a small bar chart of its deployments per
//! day over the last 14 days (inline SVG, no script) and its four numbers over
//! [`DAYS`] days: deployment frequency, lead time, change failure ratio and time to
//! restore. The numbers are `pipeline::dora`'s (the same as `GET /api/v1/projects/{p}/dora`
//! and `/metrics`); shown to whoever may `get` the project, as the API route is.

use maud::{Markup, html};

use crate::api::Verb;
use crate::pipeline::dora::{self, CHART_DAYS, StageNumbers};
use crate::server::AppState;

use super::super::{UiError, Viewer};

/// The window of the panel's numbers, in days.
pub(crate) const DAYS: u32 = 30;

const BAR_WIDTH: usize = 8;
const CHART_HEIGHT: usize = 28;

/// Each Stage's numbers, or `None` when the viewer may not `get` the project.
pub(crate) async fn load(
    state: &AppState,
    viewer: &Viewer,
    project: &str,
) -> Result<Option<Vec<StageNumbers>>, UiError> {
    let store = state.store.as_ref();
    match viewer
        .caller
        .authorize(store, Verb::Get, "projects", None, Some(project))
        .await
    {
        Ok(()) => {}
        Err(refused) if refused.status() == axum::http::StatusCode::FORBIDDEN => return Ok(None),
        Err(error) => return Err(error.into()),
    }
    let numbers = dora::read::project_numbers(store, project, jiff::Timestamp::now(), DAYS).await?;
    Ok(Some(numbers.stages))
}

/// At most this many Stages get a row; a huge project's quiet Stages are counted instead.
pub(crate) const ROW_LIMIT: usize = 50;

/// The panel: a row for each Stage with something to show (a deployment or a restore in
/// the window), at most [`ROW_LIMIT`], and how many Stages were left out.
pub(crate) fn panel(all: &[StageNumbers]) -> Markup {
    let stages: Vec<&StageNumbers> = all
        .iter()
        .filter(|s| s.deployments > 0 || s.time_to_restore_seconds.is_some())
        .take(ROW_LIMIT)
        .collect();
    let left_out = all.len() - stages.len();
    let tallest = stages
        .iter()
        .flat_map(|s| s.daily.iter().copied())
        .max()
        .unwrap_or(0)
        .max(1);
    html! {
        section #dora aria-labelledby="dora-title" {
            h2 #dora-title { "Delivery (DORA, last " (DAYS) " days)" }
            @if stages.is_empty() {
                p.muted { "No promotion into any Stage in the last " (DAYS) " days." }
            } @else {
                table {
                    thead { tr {
                        th scope="col" { "Stage" }
                        th scope="col" { "Deployments per day, last " (CHART_DAYS) " days" }
                        th scope="col" { "Deployment frequency" }
                        th scope="col" { "Lead time" }
                        th scope="col" { "Change failure rate" }
                        th scope="col" { "Time to restore" }
                    } }
                    tbody {
                        @for stage in &stages {
                            tr data-dora-stage=(stage.stage) {
                                th scope="row" { (stage.stage) }
                                td { (chart(stage, tallest)) }
                                td.frequency { (format!("{:.2}/day", stage.deployment_frequency)) " (" (stage.deployments) ")" }
                                td.lead-time { (stage.lead_time_seconds.map_or_else(none, duration)) }
                                td.change-failure { (stage.change_failure_ratio.map_or_else(none, |r| format!("{:.0}%", r * 100.0))) }
                                td.restore { (stage.time_to_restore_seconds.map_or_else(none, duration)) }
                            }
                        }
                    }
                }
            }
            @if left_out > 0 && !stages.is_empty() {
                p.muted.dora-left-out { (left_out) " more Stages without a promotion in the last " (DAYS) " days." }
            }
        }
    }
}

/// One Stage's bars, oldest day first; the title and description say it in words.
fn chart(stage: &StageNumbers, tallest: u32) -> Markup {
    let width = CHART_DAYS * BAR_WIDTH;
    let total: u32 = stage.daily.iter().sum();
    let title_id = format!("dora-chart-{}", stage.stage);
    let words = format!(
        "{} deployments to {} in the last {CHART_DAYS} days; per day, oldest first: {}",
        total,
        stage.stage,
        stage
            .daily
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    );
    html! {
        svg.dora-chart role="img" aria-labelledby=(title_id) aria-label=(words)
            width=(width) height=(CHART_HEIGHT) viewBox=(format!("0 0 {width} {CHART_HEIGHT}"))
            xmlns="http://www.w3.org/2000/svg" {
            title id=(title_id) { "Deployments per day to " (stage.stage) }
            desc { (words) }
            line x1="0" y1=(CHART_HEIGHT - 1) x2=(width) y2=(CHART_HEIGHT - 1) stroke="currentColor" stroke-opacity="0.3" {}
            @for (day, count) in stage.daily.iter().enumerate() {
                @if *count > 0 {
                    @let height = (*count as usize * (CHART_HEIGHT - 2)).div_ceil(tallest as usize).max(2);
                    rect.bar x=(day * BAR_WIDTH + 1) y=(CHART_HEIGHT - 1 - height)
                        width=(BAR_WIDTH - 2) height=(height) data-count=(count) {
                        title { (count) " on day " (day + 1) " of " (CHART_DAYS) }
                    }
                }
            }
        }
    }
}

fn none() -> String {
    "—".to_owned()
}

/// Seconds as a person reads them: `45s`, `12m`, `3h 20m`, `2d 4h`.
fn duration(seconds: f64) -> String {
    let seconds = seconds.max(0.0).round() as u64;
    match seconds {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h {}m", s / 3600, s % 3600 / 60),
        s => format!("{}d {}h", s / 86_400, s % 86_400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbers() -> StageNumbers {
        let mut daily = vec![0; CHART_DAYS];
        daily[CHART_DAYS - 1] = 2;
        daily[3] = 1;
        StageNumbers {
            stage: "prod".into(),
            days: DAYS,
            deployments: 3,
            deployment_frequency: 0.1,
            lead_time_seconds: Some(4.0 * 3600.0 + 120.0),
            change_failure_ratio: Some(1.0 / 3.0),
            time_to_restore_seconds: None,
            daily,
        }
    }

    /// The panel draws one bar per day with deployments (the tallest full height), says
    /// the same in words for a screen reader, and shows the four numbers, a dash for one
    /// with nothing to measure.
    #[test]
    fn the_panel_draws_bars_and_words_and_the_four_numbers() {
        let quiet = StageNumbers {
            stage: "qa".into(),
            deployments: 0,
            deployment_frequency: 0.0,
            lead_time_seconds: None,
            change_failure_ratio: None,
            daily: vec![0; CHART_DAYS],
            ..numbers()
        };
        let html = panel(&[numbers(), quiet]).into_string();
        assert!(!html.contains("data-dora-stage=\"qa\""), "{html}");
        assert!(html.contains("1 more Stages without a promotion"), "{html}");
        assert_eq!(html.matches("<rect").count(), 2, "{html}");
        assert!(html.contains(r#"data-count="2""#), "{html}");
        assert!(
            html.contains(
                "3 deployments to prod in the last 14 days; per day, oldest first: 0, 0, 0, 1,"
            ),
            "{html}"
        );
        assert!(html.contains("<title id=\"dora-chart-prod\">"), "{html}");
        assert!(html.contains("0.10/day (3)"), "{html}");
        assert!(html.contains("4h 2m"), "{html}");
        assert!(html.contains("33%"), "{html}");
        assert!(html.contains(r#"<td class="restore">—</td>"#), "{html}");
    }

    #[test]
    fn durations_read_as_people_say_them() {
        assert_eq!(duration(45.0), "45s");
        assert_eq!(duration(720.0), "12m");
        assert_eq!(duration(3.0 * 3600.0 + 1200.0), "3h 20m");
        assert_eq!(duration(2.0 * 86_400.0 + 4.0 * 3600.0), "2d 4h");
    }
}
