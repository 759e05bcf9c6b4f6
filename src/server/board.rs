//! `GET /api/v1/board?name=&warehouse=&attention=true`: the release board
//! ([`crate::pipeline::release_board`]) of the projects the caller may read — `get` on
//! the project and `list` on its Stages, as the project page asks. The web UI's `/` and
//! `dray get board` show the same board; [`visible_board`] is what all three call.

use axum::Json;
use axum::extract::{Query, State};

use crate::api::{Kind, Verb};
use crate::pipeline::release_board::{self, BoardFilter, ReleaseBoard};

use super::AppState;
use super::auth::Caller;
use super::error::ApiError;

/// The query parameters the board takes.
const PARAMETERS: [&str; 3] = ["name", "warehouse", "attention"];

/// The filter of a board request: `name`, `warehouse`, `attention`; another parameter, or
/// one given twice, is refused with a 400 naming it.
pub fn board_filter(query: &[(String, String)]) -> Result<BoardFilter, ApiError> {
    for (i, (key, _)) in query.iter().enumerate() {
        if !PARAMETERS.contains(&key.as_str()) {
            let key: String = key.chars().take(40).collect();
            return Err(
                ApiError::bad_request(format!("the board has no filter `{key}`"))
                    .with_hint("filter with name, warehouse or attention=true"),
            );
        }
        if query[..i].iter().any(|(k, _)| k == key) {
            return Err(
                ApiError::bad_request(format!("the board filter `{key}` is given twice"))
                    .with_hint("give each filter once"),
            );
        }
    }
    let get = |name: &str| {
        query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    BoardFilter::parse(get("name"), get("warehouse"), get("attention"))
        .map_err(|e| ApiError::bad_request(e.to_string()))
}

/// The board of the projects `caller` may read, under `filter`, read now.
pub async fn visible_board(
    state: &AppState,
    caller: &Caller,
    filter: &BoardFilter,
) -> Result<ReleaseBoard, ApiError> {
    let store = state.store.as_ref();
    let mut inputs = Vec::new();
    let mut visible = 0;
    for project in store.list(Kind::Project, None).await? {
        let name = project.key.name.as_str();
        if !caller
            .may(store, Verb::Get, "projects", None, Some(name))
            .await?
            || !caller
                .permissions(store, name)
                .await?
                .allows(Verb::List, "stages", None)
        {
            continue;
        }
        visible += 1;
        if filter.admits_project(name) {
            inputs.push(release_board::load(store, name).await?);
        }
    }
    let mut board = release_board::release_board(&inputs, filter, jiff::Timestamp::now());
    board.projects = visible;
    Ok(board)
}

/// `GET /api/v1/board`.
pub(crate) async fn get_board(
    State(state): State<AppState>,
    caller: Caller,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<ReleaseBoard>, ApiError> {
    let filter = board_filter(&query)?;
    Ok(Json(visible_board(&state, &caller, &filter).await?))
}
