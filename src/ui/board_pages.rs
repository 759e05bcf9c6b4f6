//! The release board's paging and its UI-only query parameters: at most `cols` Stage-name
//! columns (`colpage` picks which) and at most `rows` projects (`page`) per page, and
//! `stuck=1`, the "stuck only" filter (the API's `attention=true`). Parses them out of the
//! query (the rest is [`crate::server::board::board_filter`]'s), slices what is shown and
//! draws the plain links between pages, so paging works without JavaScript. Decides
//! nothing about what is stuck: that is [`crate::pipeline::release_board`]'s.

use maud::{Markup, html};

use crate::pipeline::release_board::BoardFilter;
use crate::server::ApiError;

/// Stage-name columns per page unless `cols` says otherwise.
pub(crate) const DEFAULT_COLS: usize = 8;
/// Projects per page unless `rows` says otherwise (50 services fit on one page).
pub(crate) const DEFAULT_ROWS: usize = 60;
/// The most columns or rows one page may ask for.
const MAX_PER_PAGE: usize = 500;

/// Which part of the board a request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Paging {
    /// Columns per page.
    pub cols: usize,
    /// The column page, from 1.
    pub colpage: usize,
    /// Rows per page.
    pub rows: usize,
    /// The row page, from 1.
    pub page: usize,
}

impl Default for Paging {
    fn default() -> Self {
        Paging {
            cols: DEFAULT_COLS,
            colpage: 1,
            rows: DEFAULT_ROWS,
            page: 1,
        }
    }
}

/// A request's query parameters, in order.
type Query = Vec<(String, String)>;

/// Splits `query` into the paging (and whether `stuck` is asked) and the rest, which is
/// the board filter's. A bad number is a 400 naming it.
pub(crate) fn split(query: &[(String, String)]) -> Result<(Paging, bool, Query), ApiError> {
    let mut paging = Paging::default();
    let mut stuck = false;
    let mut rest = Vec::new();
    for (key, value) in query {
        let number = |least: usize| -> Result<usize, ApiError> {
            match value.trim().parse::<usize>() {
                Ok(n) if n >= least && n <= MAX_PER_PAGE.max(least) => Ok(n),
                _ => Err(ApiError::bad_request(format!(
                    "board paging `{key}` is `{}`, not a number from {least} to {MAX_PER_PAGE}",
                    value.chars().take(40).collect::<String>()
                ))
                .with_hint("follow the board's page links, or leave it out")),
            }
        };
        match key.as_str() {
            "cols" => paging.cols = number(1)?,
            "colpage" => paging.colpage = number(1)?,
            "rows" => paging.rows = number(1)?,
            "page" => paging.page = number(1)?,
            "stuck" => {
                stuck = BoardFilter::parse(None, None, Some(value))
                    .map_err(|_| {
                        ApiError::bad_request(format!(
                            "board filter `stuck` is `{}`, not 1 or 0",
                            value.chars().take(40).collect::<String>()
                        ))
                        .with_hint("use stuck=1 or leave it out")
                    })?
                    .attention
            }
            _ => rest.push((key.clone(), value.clone())),
        }
    }
    Ok((paging, stuck, rest))
}

/// The part of `len` items page `page` (from 1) of `per` shows: the range, clamped so a
/// page past the end shows the last one; and that page's number.
pub(crate) fn window(len: usize, per: usize, page: usize) -> (std::ops::Range<usize>, usize) {
    let pages = len.div_ceil(per).max(1);
    let page = page.clamp(1, pages);
    let start = (page - 1) * per;
    (start..(start + per).min(len), page)
}

/// The link to the board with `filter` and `paging`, changed by `change`.
pub(crate) fn href(
    filter: &BoardFilter,
    paging: Paging,
    change: impl FnOnce(&mut Paging),
) -> String {
    let mut paging = paging;
    change(&mut paging);
    let mut pairs: Vec<(&str, String)> = Vec::new();
    if let Some(name) = &filter.name {
        pairs.push(("name", name.clone()));
    }
    if let Some(warehouse) = &filter.warehouse {
        pairs.push(("warehouse", warehouse.clone()));
    }
    if filter.attention {
        pairs.push(("stuck", "1".into()));
    }
    let default = Paging::default();
    if paging.cols != default.cols {
        pairs.push(("cols", paging.cols.to_string()));
    }
    if paging.colpage != 1 {
        pairs.push(("colpage", paging.colpage.to_string()));
    }
    if paging.rows != default.rows {
        pairs.push(("rows", paging.rows.to_string()));
    }
    if paging.page != 1 {
        pairs.push(("page", paging.page.to_string()));
    }
    let query: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{k}={}", encode(v)))
        .collect();
    format!("/?{}", query.join("&"))
}

/// `text` percent-encoded for a query value.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            b => format!("%{b:02X}"),
        })
        .collect()
}

/// "Stage names 9–16 of 20 · 12 hidden", with the links to the pages beside it, or
/// nothing when everything fits on one page. `what` names the items (`Stage names`,
/// `projects`), `id` the nav's id.
pub(crate) fn nav(
    id: &str,
    what: &str,
    len: usize,
    shown: &std::ops::Range<usize>,
    page: usize,
    per: usize,
    link: impl Fn(usize) -> String,
) -> Markup {
    let pages = len.div_ceil(per).max(1);
    html! {
        @if pages > 1 {
            nav.board-pages id=(id) aria-label=(format!("{what} pages")) {
                span.page-count {
                    (what) " " (shown.start + 1) "–" (shown.end) " of " (len)
                    " · " strong { (len - shown.len()) " hidden" }
                }
                @if page > 1 {
                    a.prev rel="prev" href=(link(page - 1)) { "← previous " (what) }
                }
                @for n in 1..=pages {
                    @if n == page {
                        span.current aria-current="page" { (n) }
                    } @else {
                        a data-page=(n) href=(link(n)) aria-label=(format!("{what} page {n}")) { (n) }
                    }
                }
                @if page < pages {
                    a.next rel="next" href=(link(page + 1)) { "next " (what) " →" }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn paging_keys_are_taken_out_and_the_rest_is_left_for_the_filter() {
        let (paging, stuck, rest) = split(&q(&[
            ("cols", "3"),
            ("stuck", "1"),
            ("name", "a b"),
            ("page", "2"),
        ]))
        .unwrap();
        assert_eq!(paging.cols, 3);
        assert_eq!(paging.page, 2);
        assert!(stuck);
        assert_eq!(rest, q(&[("name", "a b")]));
        for bad in [
            ("cols", "0"),
            ("colpage", "x"),
            ("rows", "100000"),
            ("stuck", "maybe"),
        ] {
            let error = split(&q(&[bad])).unwrap_err();
            assert!(format!("{error:?}").contains(bad.0), "{bad:?}: {error:?}");
        }
        assert!(
            ["cols", "colpage", "rows", "page", "stuck"]
                .iter()
                .all(|k| split(&q(&[(k, "1")])).unwrap().2.is_empty())
        );
    }

    #[test]
    fn a_window_past_the_end_shows_the_last_page() {
        assert_eq!(window(20, 8, 1), (0..8, 1));
        assert_eq!(window(20, 8, 3), (16..20, 3));
        assert_eq!(window(20, 8, 9), (16..20, 3));
        assert_eq!(window(0, 8, 2), (0..0, 1));
    }

    #[test]
    fn links_keep_the_filters_and_encode_them() {
        let filter = BoardFilter::parse(Some("a&b c"), None, Some("true")).unwrap();
        let link = href(&filter, Paging::default(), |p| p.colpage = 2);
        assert_eq!(link, "/?name=a%26b%20c&stuck=1&colpage=2");
    }
}
