//! Which ProjectConfig promotion policy turns auto-promotion on for a Stage. Auto-promotion
//! acts on such Stages only, and a person's rollback holds it only there; both ask here, so
//! that `request` never asks `auto`.

use crate::api::{ProjectConfig, PromotionPolicy, Stage};

use super::windows;

/// The promotion policy with auto-promotion that selects `stage`, if one does.
pub fn auto_promotion<'a>(
    stage: &Stage,
    configs: impl IntoIterator<Item = &'a ProjectConfig>,
) -> Option<&'a PromotionPolicy> {
    let labels = stage.metadata.labels.clone().unwrap_or_default();
    let name = stage.metadata.name.as_deref().unwrap_or_default();
    configs.into_iter().find_map(|config| {
        config
            .spec
            .promotion_policies
            .iter()
            .find(|p| windows::matches(&p.selector(), name, &labels))
            .filter(|p| p.auto_promotion_enabled)
    })
}
