//! `dray get board [NAME] [--warehouse W] [--attention] [-o table|wide|name|json|yaml]`:
//! the release board (`GET /api/v1/board`, `crate::pipeline::release_board`) in the
//! terminal, as the web UI's `/` shows it: one row per project, one column per Stage
//! name, each cell the Freight there, how long, health, and what needs attention.
//! `NAME` keeps projects whose name contains it.

use crate::cli::output;
use crate::cli::{CliError, Context};
use crate::pipeline::release_board::{BoardFilter, Cell, ReleaseBoard, age_text};

use super::get::{GetArgs, GetFormat};

/// Runs `dray get board`.
pub async fn run(ctx: &Context, args: &GetArgs) -> Result<(), CliError> {
    if args.stage.is_some() || args.watch {
        return Err(CliError::usage(
            "`dray get board` takes neither --stage nor --watch",
            "filter the board with a project name, --warehouse W or --attention",
        ));
    }
    let filter = BoardFilter::parse(
        args.name.as_deref(),
        args.warehouse.as_deref(),
        args.attention.then_some("true"),
    )
    .map_err(|e| CliError::usage(e.to_string(), "see `dray get --help`"))?;
    let board: ReleaseBoard = ctx.client.get(&path(&filter)).await?;
    let text = match args.output {
        GetFormat::Json => {
            serde_json::to_string_pretty(&board)
                .map_err(|e| CliError::Local(format!("cannot render JSON: {e}")))?
                + "\n"
        }
        GetFormat::Yaml => output::yaml_of(std::slice::from_ref(&board))?,
        GetFormat::Name => board
            .rows
            .iter()
            .map(|r| format!("project/{}\n", r.project))
            .collect(),
        GetFormat::Table | GetFormat::Wide if board.rows.is_empty() => {
            if board.projects == 0 {
                eprintln!("no projects found");
            } else {
                eprintln!("no project of {} matches the filters", board.projects);
            }
            return Ok(());
        }
        GetFormat::Table | GetFormat::Wide => table(&board, args.output == GetFormat::Wide),
    };
    print!("{text}");
    Ok(())
}

/// `/api/v1/board` with the filters as query parameters.
fn path(filter: &BoardFilter) -> String {
    let mut url = reqwest::Url::parse("http://board/api/v1/board").expect("a constant URL");
    {
        let mut query = url.query_pairs_mut();
        if let Some(name) = &filter.name {
            query.append_pair("name", name);
        }
        if let Some(warehouse) = &filter.warehouse {
            query.append_pair("warehouse", warehouse);
        }
        if filter.attention {
            query.append_pair("attention", "true");
        }
    }
    match url.query() {
        Some(q) if !q.is_empty() => format!("/api/v1/board?{q}"),
        _ => "/api/v1/board".to_owned(),
    }
}

/// The board as an aligned table: `PROJECT`, then one column per Stage name.
fn table(board: &ReleaseBoard, wide: bool) -> String {
    let mut header = vec!["PROJECT".to_owned()];
    header.extend(board.columns.iter().map(|c| c.to_uppercase()));
    let rows: Vec<Vec<String>> = board
        .rows
        .iter()
        .map(|row| {
            let mut line = vec![row.project.clone()];
            line.extend(
                row.aligned(&board.columns)
                    .into_iter()
                    .map(|(_, cell)| match cell {
                        Some(cell) => cell_text(board, cell, wide),
                        None => "-".to_owned(),
                    }),
            );
            line
        })
        .collect();
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    output::table(&header, &rows)
}

/// One cell: `alias (age) health` then `!why` for each attention and `≠next` for each
/// downstream Stage holding other Freight; wide adds the images and the config commit.
fn cell_text(board: &ReleaseBoard, cell: &Cell, wide: bool) -> String {
    let mut parts = Vec::new();
    match &cell.freight {
        Some(f) => {
            parts.push(f.label().to_owned());
            if wide {
                parts.extend(f.images.iter().cloned());
                parts.extend(f.commit.iter().map(|c| format!("@{c}")));
            }
            if let Some(age) = cell.age(board.now) {
                parts.push(format!("({})", age_text(age)));
            }
        }
        None => parts.push("(none)".to_owned()),
    }
    if let Some(health) = cell.health {
        parts.push(format!("{health:?}"));
    }
    if wide && let Some(v) = cell.verification {
        parts.push(format!("verification:{}", v.as_str()));
    }
    parts.extend(
        cell.attention
            .iter()
            .map(|a| format!("!{}", a.word().replace(' ', "-"))),
    );
    parts.extend(cell.differs_from.iter().map(|d| format!("≠{d}")));
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filters_become_query_parameters_escaped() {
        let filter = BoardFilter::parse(Some("web app"), Some("a&b"), Some("true")).unwrap();
        assert_eq!(
            path(&filter),
            "/api/v1/board?name=web+app&warehouse=a%26b&attention=true"
        );
        assert_eq!(path(&BoardFilter::default()), "/api/v1/board");
    }
}
