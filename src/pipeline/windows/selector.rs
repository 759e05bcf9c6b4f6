//! Which Stages a promotion window applies to: its `stageSelector` (a name, exact or
//! `glob:`, and `matchLabels`). Knows nothing of times.

use std::collections::BTreeMap;

use globset::Glob;

use crate::api::StageSelector;

/// Whether `selector` selects the Stage `stage_name` with `stage_labels`.
///
/// `name` is compared exactly, or as a glob when prefixed with `glob:` (`glob:prod-*`);
/// every `matchLabels` entry must be carried by the Stage. An empty selector selects
/// every Stage. A `glob:` pattern that is not a glob selects nothing ([`super::validate`] rejects
/// it at apply time).
pub fn matches(
    selector: &StageSelector,
    stage_name: &str,
    stage_labels: &BTreeMap<String, String>,
) -> bool {
    let name_matches = match selector.name.as_deref() {
        None => true,
        Some(name) => match name.strip_prefix("glob:") {
            Some(pattern) => Glob::new(pattern)
                .map(|glob| glob.compile_matcher().is_match(stage_name))
                .unwrap_or(false),
            None => name == stage_name,
        },
    };
    name_matches
        && selector
            .match_labels
            .iter()
            .all(|(key, value)| stage_labels.get(key) == Some(value))
}
