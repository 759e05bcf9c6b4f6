//! Each node's height on the project page, estimated from what it shows, so that the first
//! layout is close; the page's script measures the real heights and re-stacks the columns.

use std::collections::HashMap;

use crate::api::{HealthState, Stage};

use super::super::graph::{self, NodeRef};
use super::super::view::{self, freight_label};
use super::ProjectData;
use super::stage_node::{
    health_of, refusals, stage_actions, verification_message_shown, window_text, written_to_git,
};

/// Pixels per line of node text (`app.css`: `.node { line-height: 18px }`) and of the
/// smaller lines (details, reasons, badges: 15px).
const LINE: u32 = 18;
const SMALL_LINE: u32 = 15;
/// The width text wraps at inside a node, and rough character widths at 14px and 11–12px.
const INNER_WIDTH: u32 = graph::NODE_WIDTH - 20;
const CHAR: u32 = 7;
const SMALL_CHAR: u32 = 6;

/// Lines `text` takes when wrapped at the node's width.
fn lines(text: &str, char_width: u32) -> u32 {
    let width = text.chars().count() as u32 * char_width;
    width.div_ceil(INNER_WIDTH).max(1)
}

/// Rows that boxes of these widths take when they wrap in the node.
fn rows(widths: impl IntoIterator<Item = u32>) -> u32 {
    let (mut rows, mut used) = (0, INNER_WIDTH);
    for w in widths {
        let w = w.min(INNER_WIDTH);
        if used + w > INNER_WIDTH {
            rows += 1;
            used = 0;
        }
        used += w + 4;
    }
    rows
}

/// Each node's height, estimated from what it shows (the script measures the real ones):
/// a Warehouse is as tall as its three lines, a Stage as its content.
pub(super) fn node_heights(data: &ProjectData) -> Vec<u32> {
    let stages: HashMap<&str, &Stage> = data
        .stages
        .iter()
        .filter_map(|s| Some((s.metadata.name.as_deref()?, s)))
        .collect();
    // Padding and border, top and bottom.
    let frame = 2 * 6 + 2;
    data.layout
        .nodes
        .iter()
        .map(|n| match &n.node {
            NodeRef::Warehouse(_) => frame + SMALL_LINE + LINE + SMALL_LINE,
            NodeRef::Stage(name) => match stages.get(name.as_str()) {
                Some(stage) => frame + stage_height(data, stage),
                None => graph::NODE_HEIGHT,
            },
        })
        .collect()
}

fn stage_height(data: &ProjectData, stage: &Stage) -> u32 {
    let name = stage.metadata.name.clone().unwrap_or_default();
    let status = stage.status.clone().unwrap_or_default();
    // Kind, name, current Freight (its artifacts wrap after the alias).
    let mut height = SMALL_LINE + LINE;
    let current: Vec<u32> = match status
        .current_freight
        .as_ref()
        .and_then(|c| data.freight.get(&c.name))
    {
        Some(f) => std::iter::once(freight_label(f).len() as u32 * CHAR)
            .chain(
                f.spec
                    .images
                    .iter()
                    .map(|i| view::image_label(i).len() as u32 * SMALL_CHAR),
            )
            .chain(
                f.spec
                    .commits
                    .iter()
                    .map(|c| (view::repo_name(&c.repo_url).len() as u32 + 8) * SMALL_CHAR),
            )
            .collect(),
        None => vec![100],
    };
    height += rows(current) * LINE + 4;
    if let Some((state, message)) = health_of(stage, &status) {
        height += LINE;
        if state == HealthState::Unhealthy && !message.is_empty() {
            height += lines(&message, SMALL_CHAR) * SMALL_LINE;
        }
    }
    if let Some(v) = &status.verification {
        height += LINE;
        if verification_message_shown(v) {
            height += lines(&v.message, SMALL_CHAR) * SMALL_LINE;
        }
    }
    if written_to_git(data, &status).is_some() {
        height += LINE + SMALL_LINE;
    }
    let mut badges: Vec<u32> = Vec::new();
    if let Some(p) = &status.current_promotion {
        badges.push((p.len() as u32 + 11) * SMALL_CHAR + 14);
    }
    if let Some(h) = &status.hold {
        badges.push((h.by.len() as u32 + 8) * SMALL_CHAR + 14);
    }
    let window = window_text(data.boards.get(&name)).unwrap_or_else(|| "window open".to_owned());
    badges.push(window.len() as u32 * SMALL_CHAR + 14);
    height += rows(badges) * (SMALL_LINE + 4) + 4;
    let actions = stage_actions(data, stage, &status);
    height += rows(actions.iter().map(|a| a.label.len() as u32 * CHAR + 22)) * 30;
    for why in refusals(&actions) {
        height += lines(why, SMALL_CHAR) * SMALL_LINE;
    }
    height
}
