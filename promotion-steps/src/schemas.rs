//! The committed JSON schemas of the steps' configs (`promotion-steps/schemas/<kind>.json`)
//! are generated from the `Config` types and checked: this test fails when one is stale or
//! missing. Regenerate them with
//!
//! ```text
//! UPDATE_SCHEMAS=1 cargo test -p dray-steps schemas
//! ```

use std::path::Path;

use crate::builtin_steps;

#[test]
fn committed_step_schemas_are_up_to_date() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas");
    let update = std::env::var_os("UPDATE_SCHEMAS").is_some_and(|v| v == "1");
    let registry = builtin_steps();
    let mut stale = Vec::new();
    for kind in registry.kinds() {
        let step = registry.get(kind).expect("a listed kind is registered");
        let mut schema = serde_json::to_string_pretty(&step.config_schema()).expect("schema");
        schema.push('\n');
        let file = dir.join(format!("{kind}.json"));
        if update {
            std::fs::create_dir_all(&dir).expect("create the schemas directory");
            if std::fs::read_to_string(&file).ok().as_deref() != Some(schema.as_str()) {
                std::fs::write(&file, &schema).expect("write a schema");
            }
        } else if std::fs::read_to_string(&file).ok().as_deref() != Some(schema.as_str()) {
            stale.push(format!("schemas/{kind}.json"));
        }
    }
    assert!(
        stale.is_empty(),
        "these step schemas are stale or missing: {}\nhint: run `UPDATE_SCHEMAS=1 cargo test -p \
         dray-steps schemas` and commit the files",
        stale.join(", ")
    );
}
