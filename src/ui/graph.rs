//! The pipeline as a drawing: Warehouses and Stages laid out as a DAG, left to right.
//!
//! Each node's column (layer) is the longest path to it from a Warehouse, so every edge
//! points right; within a column nodes are ordered by the mean row of what feeds them,
//! which keeps most edges short and uncrossed. Stages caught in a cycle (the config
//! validator refuses those, but the store may still hold one) go one column past the
//! rest instead of looping. Boxes are as tall as their content: [`Layout::size`] takes
//! each node's height (`project_page` estimates it from what the box shows) and stacks
//! every column from the top, so a two-line Warehouse is not drawn as tall as a Stage
//! with six badges. The page's script re-stacks with the heights the browser measured.
//! Pure: positions in, positions out; `project_page` draws them.

use std::collections::{HashMap, HashSet};

/// Width of a node box, in CSS pixels.
pub(crate) const NODE_WIDTH: u32 = 250;
/// Height of a Stage's box until [`Layout::size`] says otherwise.
pub(crate) const NODE_HEIGHT: u32 = 120;
/// Height of a Warehouse's box until [`Layout::size`] says otherwise.
pub(crate) const WAREHOUSE_HEIGHT: u32 = 56;
/// Horizontal space between columns (`app.js` uses the same).
pub(crate) const GAP_X: u32 = 70;
/// Vertical space between boxes in a column (`app.js` uses the same).
pub(crate) const GAP_Y: u32 = 20;
/// Space around the drawing (`app.js` uses the same).
pub(crate) const MARGIN: u32 = 16;

/// What feeds a Stage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Upstream {
    /// Freight straight from a Warehouse.
    Warehouse(String),
    /// Freight verified in an upstream Stage.
    Stage(String),
}

/// A node to place.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum NodeRef {
    /// The Warehouse with this name.
    Warehouse(String),
    /// The Stage with this name.
    Stage(String),
}

/// A placed node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Placed {
    /// Which node.
    pub node: NodeRef,
    /// Its column.
    pub layer: usize,
    /// Its row in the column.
    pub row: usize,
    /// Top edge, in pixels.
    top: u32,
    /// Height of its box, in pixels.
    height: u32,
}

impl Placed {
    /// Left edge, in pixels.
    pub(crate) fn x(&self) -> u32 {
        MARGIN + self.layer as u32 * (NODE_WIDTH + GAP_X)
    }

    /// Top edge, in pixels.
    pub(crate) fn y(&self) -> u32 {
        self.top
    }

    /// Height of its box, in pixels.
    #[cfg(test)]
    pub(crate) fn height(&self) -> u32 {
        self.height
    }

    /// The vertical middle of its box, where edges meet it.
    fn middle(&self) -> u32 {
        self.top + self.height / 2
    }
}

/// The whole drawing.
#[derive(Clone, Debug, Default)]
pub(crate) struct Layout {
    /// Warehouses first, then Stages in the order given.
    pub nodes: Vec<Placed>,
    /// Edges, as indexes into `nodes` (from, to).
    pub edges: Vec<(usize, usize)>,
}

impl Layout {
    /// The drawing's width in pixels.
    pub(crate) fn width(&self) -> u32 {
        let layers = self.nodes.iter().map(|n| n.layer + 1).max().unwrap_or(1) as u32;
        2 * MARGIN + layers * NODE_WIDTH + layers.saturating_sub(1) * GAP_X
    }

    /// The drawing's height in pixels: its tallest column.
    pub(crate) fn height(&self) -> u32 {
        let bottom = self
            .nodes
            .iter()
            .map(|n| n.top + n.height)
            .max()
            .unwrap_or(MARGIN);
        bottom + MARGIN
    }

    /// Gives every node its height (`heights[i]` for `nodes[i]`; missing ones keep theirs)
    /// and stacks each column from the top in row order, `GAP_Y` apart.
    pub(crate) fn size(&mut self, heights: &[u32]) {
        for (node, &h) in self.nodes.iter_mut().zip(heights) {
            node.height = h.max(1);
        }
        self.stack();
    }

    fn stack(&mut self) {
        let mut order: Vec<usize> = (0..self.nodes.len()).collect();
        order.sort_by_key(|&i| (self.nodes[i].layer, self.nodes[i].row));
        let mut column = usize::MAX;
        let mut next = MARGIN;
        for i in order {
            if self.nodes[i].layer != column {
                column = self.nodes[i].layer;
                next = MARGIN;
            }
            self.nodes[i].top = next;
            next += self.nodes[i].height + GAP_Y;
        }
    }

    /// An SVG path for edge `(from, to)`: from the right middle of one box to the left
    /// middle of the other.
    pub(crate) fn edge_path(&self, from: usize, to: usize) -> String {
        let (a, b) = (&self.nodes[from], &self.nodes[to]);
        let (x1, y1) = (a.x() + NODE_WIDTH, a.middle());
        let (x2, y2) = (b.x(), b.middle());
        let bend = (x2.saturating_sub(x1)) / 2;
        if x2 > x1 {
            format!(
                "M{x1},{y1} C{},{y1} {},{y2} {x2},{y2}",
                x1 + bend,
                x2 - bend
            )
        } else {
            // Only a cycle's back edge goes left; draw it straight.
            format!("M{x1},{y1} L{x2},{y2}")
        }
    }
}

/// Lays out `warehouses` and `stages` (each with what feeds it). Upstreams that name
/// nothing known are left out.
pub(crate) fn layout(warehouses: &[String], stages: &[(String, Vec<Upstream>)]) -> Layout {
    let mut index: HashMap<NodeRef, usize> = HashMap::new();
    let mut nodes: Vec<NodeRef> = Vec::new();
    for w in warehouses {
        let node = NodeRef::Warehouse(w.clone());
        if !index.contains_key(&node) {
            index.insert(node.clone(), nodes.len());
            nodes.push(node);
        }
    }
    for (s, _) in stages {
        let node = NodeRef::Stage(s.clone());
        if !index.contains_key(&node) {
            index.insert(node.clone(), nodes.len());
            nodes.push(node);
        }
    }
    let mut edges = Vec::new();
    let mut seen_edges: HashSet<(usize, usize)> = HashSet::new();
    let mut incoming: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    let mut outgoing: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (s, ups) in stages {
        let to = index[&NodeRef::Stage(s.clone())];
        for up in ups {
            let from_node = match up {
                Upstream::Warehouse(w) => NodeRef::Warehouse(w.clone()),
                Upstream::Stage(s) => NodeRef::Stage(s.clone()),
            };
            let Some(&from) = index.get(&from_node) else {
                continue;
            };
            if from == to || !seen_edges.insert((from, to)) {
                continue;
            }
            edges.push((from, to));
            incoming[to].push(from);
            outgoing[from].push(to);
        }
    }
    // Longest path by Kahn's algorithm; what is left unvisited sits in a cycle.
    let mut layer = vec![0usize; nodes.len()];
    let mut remaining: Vec<usize> = incoming.iter().map(Vec::len).collect();
    let mut ready: Vec<usize> = (0..nodes.len()).filter(|&n| remaining[n] == 0).collect();
    let mut visited = vec![false; nodes.len()];
    while let Some(n) = ready.pop() {
        visited[n] = true;
        for &next in &outgoing[n] {
            layer[next] = layer[next].max(layer[n] + 1);
            remaining[next] -= 1;
            if remaining[next] == 0 {
                ready.push(next);
            }
        }
    }
    let deepest = layer.iter().copied().max().unwrap_or(0);
    for n in 0..nodes.len() {
        if !visited[n] {
            layer[n] = deepest + 1;
        }
    }
    // Rows: column by column, ordered by the mean row of the node's upstreams.
    let columns = layer.iter().copied().max().unwrap_or(0) + 1;
    let mut by_column: Vec<Vec<usize>> = vec![Vec::new(); columns];
    for (n, &column) in layer.iter().enumerate() {
        by_column[column].push(n);
    }
    let mut row = vec![0usize; nodes.len()];
    for (column, in_column) in by_column.iter().enumerate() {
        let mut members: Vec<(f64, usize)> = in_column
            .iter()
            .map(|&n| {
                let ups: Vec<usize> = incoming[n]
                    .iter()
                    .copied()
                    .filter(|&u| layer[u] < column)
                    .collect();
                let mean = if ups.is_empty() {
                    n as f64
                } else {
                    ups.iter().map(|&u| row[u] as f64).sum::<f64>() / ups.len() as f64
                };
                (mean, n)
            })
            .collect();
        members.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        for (i, (_, n)) in members.into_iter().enumerate() {
            row[n] = i;
        }
    }
    let mut placed = Layout {
        nodes: nodes
            .into_iter()
            .enumerate()
            .map(|(n, node)| {
                let height = match node {
                    NodeRef::Warehouse(_) => WAREHOUSE_HEIGHT,
                    NodeRef::Stage(_) => NODE_HEIGHT,
                };
                Placed {
                    node,
                    layer: layer[n],
                    row: row[n],
                    top: 0,
                    height,
                }
            })
            .collect(),
        edges,
    };
    placed.stack();
    placed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(name: &str, ups: &[Upstream]) -> (String, Vec<Upstream>) {
        (name.to_owned(), ups.to_vec())
    }

    fn layer_of(layout: &Layout, name: &str) -> usize {
        layout
            .nodes
            .iter()
            .find(|n| n.node == NodeRef::Stage(name.into()))
            .map(|n| n.layer)
            .unwrap()
    }

    #[test]
    fn layers_follow_the_longest_path_from_warehouses() {
        let w = |n: &str| Upstream::Warehouse(n.into());
        let s = |n: &str| Upstream::Stage(n.into());
        // prod is fed by staging (layer 2) and straight by the warehouse: longest wins.
        let layout = layout(
            &["app".into()],
            &[
                stage("prod", &[s("staging"), w("app")]),
                stage("dev", &[w("app")]),
                stage("staging", &[s("dev")]),
                stage("qa", &[s("dev")]),
            ],
        );
        assert_eq!(layer_of(&layout, "dev"), 1);
        assert_eq!(layer_of(&layout, "staging"), 2);
        assert_eq!(layer_of(&layout, "qa"), 2);
        assert_eq!(layer_of(&layout, "prod"), 3);
        assert_eq!(layout.edges.len(), 5);
        // Every edge points right.
        for &(a, b) in &layout.edges {
            assert!(layout.nodes[a].layer < layout.nodes[b].layer);
        }
        // Two nodes never share a cell.
        let mut cells: Vec<(usize, usize)> =
            layout.nodes.iter().map(|n| (n.layer, n.row)).collect();
        cells.sort();
        cells.dedup();
        assert_eq!(cells.len(), layout.nodes.len());
    }

    #[test]
    fn a_cycle_and_unknown_upstreams_do_not_loop_or_panic() {
        let s = |n: &str| Upstream::Stage(n.into());
        let layout = layout(
            &[],
            &[
                stage("a", &[s("b")]),
                stage("b", &[s("a")]),
                stage("c", &[s("ghost")]),
            ],
        );
        assert_eq!(layout.nodes.len(), 3);
        assert_eq!(layer_of(&layout, "c"), 0);
        assert_eq!(layer_of(&layout, "a"), 1);
        assert_eq!(layer_of(&layout, "b"), 1);
        assert!(layout.width() > NODE_WIDTH && layout.height() > NODE_HEIGHT);
    }

    #[test]
    fn boxes_are_as_tall_as_their_content_and_columns_stack_without_overlap() {
        let w = |n: &str| Upstream::Warehouse(n.into());
        let mut layout = layout(
            &["app".into()],
            &[stage("a", &[w("app")]), stage("b", &[w("app")])],
        );
        // app, a, b: a short Warehouse, a tall and a short Stage.
        layout.size(&[40, 300, 90]);
        let node = |name: NodeRef| layout.nodes.iter().find(|n| n.node == name).unwrap();
        let app = node(NodeRef::Warehouse("app".into()));
        let a = node(NodeRef::Stage("a".into()));
        let b = node(NodeRef::Stage("b".into()));
        assert_eq!(app.height(), 40);
        assert_eq!((a.layer, b.layer), (1, 1));
        let (upper, lower) = if a.row < b.row { (a, b) } else { (b, a) };
        assert_eq!(upper.y(), MARGIN);
        assert_eq!(lower.y(), upper.y() + upper.height() + GAP_Y);
        assert_eq!(layout.height(), MARGIN + 300 + GAP_Y + 90 + MARGIN);
        // Edges meet each box at its own middle.
        let to_a = layout
            .edges
            .iter()
            .position(|&(_, to)| layout.nodes[to].node == NodeRef::Stage("a".into()))
            .unwrap();
        let (from, to) = layout.edges[to_a];
        let path = layout.edge_path(from, to);
        assert!(
            path.starts_with(&format!("M{},{}", app.x() + NODE_WIDTH, MARGIN + 20)),
            "{path}"
        );
        assert!(
            path.ends_with(&format!("{},{}", a.x(), a.y() + 150)),
            "{path}"
        );
    }
}
