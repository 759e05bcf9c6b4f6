//! Which Stages the project page draws. A person reads a few dozen Stage cards, not
//! thousands, so beyond [`GRAPH_LIMIT`] the graph collapses by depth: the Stages nearest
//! the Warehouses (whole columns, as many as fit), with the count of the rest per
//! Warehouse and links to show one Warehouse's Stages (`?warehouse=W`). `?q=` finds Stages
//! by name (case-insensitive, part of the name); both are query parameters, so they work
//! without JavaScript. Whatever is asked, at most [`GRAPH_LIMIT`] cards are drawn.

use std::collections::BTreeMap;

use super::super::graph::{self, NodeRef};
use super::outline::StageOutline;
use super::pipeline::upstreams;

/// The most Stage cards the page draws at once.
pub(crate) const GRAPH_LIMIT: usize = 120;

/// The longest search or Warehouse parameter taken (a name is at most 253 characters).
const MAX_PARAMETER: usize = 253;

/// What the graph shows of the project's Stages, and what it leaves out.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Scope {
    /// The search, as given (trimmed).
    pub q: Option<String>,
    /// The Warehouse asked for.
    pub warehouse: Option<String>,
    /// How many Stages the project has.
    pub total: usize,
    /// How many match the search and the Warehouse.
    pub matched: usize,
    /// The deepest column drawn when the graph is collapsed by depth.
    pub depth: Option<usize>,
    /// For each Warehouse, how many of its Stages are not drawn.
    pub hidden_by_warehouse: BTreeMap<String, usize>,
}

impl Scope {
    /// Whether some Stages are not drawn.
    pub(crate) fn is_partial(&self) -> bool {
        self.matched < self.total || self.depth.is_some() || self.matched > GRAPH_LIMIT
    }
}

/// A search or Warehouse parameter: trimmed, empty is none, cut to a name's length.
pub(crate) fn parameter(value: Option<&str>) -> Option<String> {
    let value = value.map(str::trim).filter(|v| !v.is_empty())?;
    Some(value.chars().take(MAX_PARAMETER).collect())
}

/// The Stages of `stages` the page draws, in `stages`' order (see the module doc), and
/// what it left out.
pub(crate) fn scope(
    stages: &[StageOutline],
    q: Option<String>,
    warehouse: Option<String>,
) -> (Vec<&StageOutline>, Scope) {
    let total = stages.len();
    let needle = q.as_ref().map(|q| q.to_lowercase());
    let (mut kept, mut hidden): (Vec<&StageOutline>, Vec<&StageOutline>) =
        stages.iter().partition(|s| {
            needle
                .as_ref()
                .is_none_or(|n| s.name.to_lowercase().contains(n.as_str()))
                && warehouse
                    .as_ref()
                    .is_none_or(|w| s.origins().any(|o| o == w))
        });
    let matched = kept.len();
    let mut depth = None;
    if kept.len() > GRAPH_LIMIT {
        let layers = layers(&kept);
        let mut count = 0;
        let mut deepest = 0;
        let mut per_layer: BTreeMap<usize, usize> = BTreeMap::new();
        for layer in layers.values() {
            *per_layer.entry(*layer).or_default() += 1;
        }
        for (&layer, &n) in &per_layer {
            if count + n > GRAPH_LIMIT && count > 0 {
                break;
            }
            count += n;
            deepest = layer;
        }
        let (near, far): (Vec<&StageOutline>, Vec<&StageOutline>) = kept
            .into_iter()
            .partition(|s| layers.get(s.name.as_str()).is_some_and(|l| *l <= deepest));
        kept = near;
        hidden.extend(far);
        // One column wider than the limit (a fan-out of thousands) is cut to the limit.
        if kept.len() > GRAPH_LIMIT {
            kept.sort_by(|a, b| a.name.cmp(&b.name));
            hidden.extend(kept.split_off(GRAPH_LIMIT));
        }
        depth = Some(deepest);
    }
    let mut hidden_by_warehouse: BTreeMap<String, usize> = BTreeMap::new();
    if depth.is_some() || q.is_some() || warehouse.is_some() {
        for stage in &hidden {
            for origin in stage.origins() {
                *hidden_by_warehouse.entry(origin.to_owned()).or_default() += 1;
            }
        }
    }
    let scope = Scope {
        q,
        warehouse,
        total,
        matched,
        depth,
        hidden_by_warehouse,
    };
    (kept, scope)
}

/// Each Stage's column in the graph of `stages` alone (the longest path from a Warehouse).
fn layers(stages: &[&StageOutline]) -> BTreeMap<String, usize> {
    let layout = graph::layout(
        &[],
        &stages
            .iter()
            .map(|s| (s.name.clone(), upstreams(&s.requested_freight)))
            .collect::<Vec<_>>(),
    );
    layout
        .nodes
        .iter()
        .filter_map(|n| match &n.node {
            NodeRef::Stage(name) => Some((name.clone(), n.layer)),
            NodeRef::Warehouse(_) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn stage(name: &str, warehouse: &str, from: &[String]) -> StageOutline {
        StageOutline {
            name: name.to_owned(),
            requested_freight: serde_json::from_value(json!([{
                "origin": {"kind": "Warehouse", "name": warehouse},
                "sources": {"direct": from.is_empty(), "stages": from}}]))
            .unwrap(),
            health: None,
            holds_freight: false,
        }
    }

    /// Two Warehouses; `api` a chain of 300 Stages, `web` 3 Stages.
    fn stages() -> Vec<StageOutline> {
        let mut all = Vec::new();
        for i in 0..300 {
            let from = if i == 0 {
                vec![]
            } else {
                vec![format!("api-{:03}", i - 1)]
            };
            all.push(stage(&format!("api-{i:03}"), "api", &from));
        }
        for name in ["web-dev", "web-qa", "web-prod"] {
            all.push(stage(name, "web", &[]));
        }
        all
    }

    fn names(stages: &[&StageOutline]) -> Vec<String> {
        stages.iter().map(|s| s.name.clone()).collect()
    }

    #[test]
    fn a_small_project_is_drawn_whole() {
        let few: Vec<StageOutline> = stages().into_iter().skip(295).collect();
        let (few, scope) = scope(&few, None, None);
        assert_eq!(few.len(), 8);
        assert!(!scope.is_partial(), "{scope:?}");
        assert!(scope.hidden_by_warehouse.is_empty());
    }

    #[test]
    fn a_large_project_collapses_by_depth_and_counts_the_rest_per_warehouse() {
        let stages = stages();
        let (all, scope) = scope(&stages, None, None);
        assert!(all.len() <= GRAPH_LIMIT, "{}", all.len());
        assert_eq!(scope.total, 303);
        assert_eq!(scope.depth, Some(all.len() - 4));
        assert!(names(&all).contains(&"web-prod".to_owned()));
        assert!(names(&all).contains(&"api-000".to_owned()));
        assert_eq!(
            scope.hidden_by_warehouse.get("api"),
            Some(&(303 - all.len()))
        );
        assert!(scope.is_partial());
    }

    #[test]
    fn search_and_warehouse_pick_the_stages_drawn() {
        let stages = stages();
        let (all, scope) = scope(&stages, parameter(Some(" API-29 ")), None);
        assert_eq!(
            names(&all),
            (290..300).map(|i| format!("api-{i}")).collect::<Vec<_>>()
        );
        assert_eq!(scope.matched, 10);
        assert_eq!(scope.depth, None);
        let (all, web) = super::scope(&stages, None, parameter(Some("web")));
        assert_eq!(names(&all), ["web-dev", "web-qa", "web-prod"]);
        assert_eq!(web.hidden_by_warehouse.get("api"), Some(&300));
        assert_eq!(parameter(Some("   ")), None);
        assert_eq!(
            parameter(Some(&"x".repeat(999))).map(|p| p.len()),
            Some(253)
        );
    }
}
