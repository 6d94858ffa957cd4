//! Plain aligned text: tables with columns padded to their widest cell, and bars.

use std::fmt::Write;

/// Width of a bar in characters.
pub const BAR_WIDTH: usize = 20;

/// Rows of cells, printed with every column padded to its widest cell and separated by
/// two spaces (kubectl's style). Trailing spaces are trimmed.
#[derive(Debug, Default)]
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with a header row.
    pub fn new(header: &[&str]) -> Self {
        Self {
            rows: vec![header.iter().map(|h| (*h).to_owned()).collect()],
        }
    }

    /// A table without a header.
    pub fn headless() -> Self {
        Self::default()
    }

    /// Appends a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The text, each line indented by `indent` spaces.
    pub fn render(&self, indent: usize) -> String {
        let columns = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..columns)
            .map(|c| {
                self.rows
                    .iter()
                    .filter_map(|r| r.get(c))
                    .map(|s| s.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for row in &self.rows {
            let mut line = " ".repeat(indent);
            for (c, cell) in row.iter().enumerate() {
                let _ = write!(line, "{cell:<width$}  ", width = widths[c]);
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// `[########............]`: `free` of `total` as filled cells (free capacity reads as
/// fill). An empty total draws an empty bar.
pub fn bar(free: i64, total: i64) -> String {
    let filled = if total <= 0 {
        0
    } else {
        let f = free.clamp(0, total) as f64 / total as f64;
        (f * BAR_WIDTH as f64).round() as usize
    };
    format!("[{}{}]", "#".repeat(filled), ".".repeat(BAR_WIDTH - filled))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_on_the_widest_cell() {
        let mut t = Table::new(&["NODE", "ZONES"]);
        t.row(vec!["a-long-name".into(), "2".into()]);
        t.row(vec!["b".into(), "4".into()]);
        assert_eq!(
            t.render(2),
            "  NODE         ZONES\n  a-long-name  2\n  b            4\n"
        );
    }

    #[test]
    fn bars_fill_with_the_free_share() {
        assert_eq!(bar(10, 10), format!("[{}]", "#".repeat(20)));
        assert_eq!(bar(0, 10), format!("[{}]", ".".repeat(20)));
        assert_eq!(
            bar(5, 10),
            format!("[{}{}]", "#".repeat(10), ".".repeat(10))
        );
        assert_eq!(bar(3, 0), format!("[{}]", ".".repeat(20)));
        assert_eq!(bar(-1, 8), format!("[{}]", ".".repeat(20)));
    }
}
