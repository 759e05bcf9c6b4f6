//! The `--stage` and `--warehouse` filters of `dray get`: each names a resource that must
//! exist, so a typo is an error with "did you mean" rather than an empty or full listing.

use crate::api::suggest;
use crate::cli::CliError;

/// What a filter names: a Stage or a Warehouse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filtered {
    /// `--stage`.
    Stage,
    /// `--warehouse`.
    Warehouse,
}

impl Filtered {
    fn kind(self) -> &'static str {
        match self {
            Filtered::Stage => "Stage",
            Filtered::Warehouse => "Warehouse",
        }
    }

    fn plural(self) -> &'static str {
        match self {
            Filtered::Stage => "stages",
            Filtered::Warehouse => "warehouses",
        }
    }
}

/// `Ok` when `wanted` is one of `names` (the project's Stages or Warehouses); else an error
/// naming it, with "did you mean" when one is close and how to list them.
pub fn must_exist(
    what: Filtered,
    wanted: &str,
    names: &[&str],
    project: &str,
) -> Result<(), CliError> {
    if names.contains(&wanted) {
        return Ok(());
    }
    let list = format!("run `dray get {} -p {project}` to list them", what.plural());
    let hint = match suggest::closest(wanted, names.iter().copied()) {
        Some(best) => format!("did you mean `{best}`? ({list})"),
        None => list,
    };
    Err(CliError::usage(
        format!(
            "--{} `{wanted}`: {} `{wanted}` does not exist in project `{project}`",
            what.plural().trim_end_matches('s'),
            what.kind()
        ),
        hint,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_filter_is_named_with_a_suggestion() {
        assert!(must_exist(Filtered::Stage, "dev", &["dev", "prod"], "demo").is_ok());
        let error =
            must_exist(Filtered::Stage, "dve", &["dev", "prod"], "demo").expect_err("no Stage dve");
        assert_eq!(
            error.to_string(),
            "--stage `dve`: Stage `dve` does not exist in project `demo`"
        );
        assert_eq!(
            error.hint().as_deref(),
            Some("did you mean `dev`? (run `dray get stages -p demo` to list them)")
        );
        let error = must_exist(Filtered::Warehouse, "nope", &["app"], "demo")
            .expect_err("no Warehouse nope");
        assert_eq!(
            error.hint().as_deref(),
            Some("run `dray get warehouses -p demo` to list them")
        );
    }
}
