//! Order statistics for latency samples.

pub struct Stats {
    pub median: f64,
    pub p90: f64,
    pub min: f64,
}

pub fn stats(mut xs: Vec<f64>) -> Stats {
    xs.sort_by(f64::total_cmp);
    let at = |q: f64| xs[((xs.len() - 1) as f64 * q).round() as usize];
    Stats {
        median: at(0.5),
        p90: at(0.9),
        min: xs[0],
    }
}

impl Stats {
    /// A Markdown table row: `what`, min, p50 and p90 in ms.
    pub fn row(&self, what: &str) -> String {
        format!(
            "| {what} | {:.1} | {:.1} | {:.1} |",
            self.min, self.median, self.p90
        )
    }
}
