//! The chart of a run (issue #28): how each checked ratio and the operator's RSS grow with N,
//! as one self-contained SVG written beside the doc (`docs/benchmark.svg`) and embedded in its
//! generated section, for a reader who would rather look than read the tables.
//!
//! Plain text, no dependency: a few lines, markers and labels are all it takes, and the output
//! is the same bytes for the same run (coordinates rounded to 0.1 px, no date but the run's), so
//! a regenerated chart only shows in a diff when the figures changed. A white background keeps
//! it readable in GitHub's dark theme, which shows an SVG as it is.

use std::fmt::Write as _;

use anyhow::Context as _;

use crate::figures::{MAX_RATIO, P99_SLACK_MS, RSS_CHECK, SizeResult, rss_target_kib};
use crate::report::Run;

/// Width of the picture, px; GitHub scales it down to the page's width.
const WIDTH: f64 = 760.0;
/// Left of a plot: the y tick labels and the y axis' title.
const LEFT: f64 = 72.0;
/// Right of a plot: the values of the dashed lines.
const RIGHT: f64 = 56.0;
const PLOT_HEIGHT: f64 = 190.0;
/// The smallest and largest N are this far inside the plot's frame, not on it.
const INSET: f64 = 28.0;
/// Height of a legend row.
const ROW: f64 = 17.0;
/// Two labels of N closer than this (px) would overlap: the second is left out.
const LABEL_GAP: f64 = 46.0;
const TEXT: &str = "#222222";
const GRID: &str = "#e4e4e4";
const FRAME: &str = "#999999";

/// N on a log scale over whole decades, from the one at or below the smallest N to the one at
/// or above the largest, so that the grid falls on 100, 1,000, 10,000.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LogAxis {
    pub low_decade: u32,
    pub high_decade: u32,
    pub left_px: f64,
    pub right_px: f64,
}

/// The largest k with 10^k <= n (0 for n <= 1).
fn decade_below(n: u64) -> u32 {
    let mut k = 0;
    let mut next = 10_u64;
    while next <= n {
        k += 1;
        match next.checked_mul(10) {
            Some(p) => next = p,
            None => break,
        }
    }
    k
}

/// The smallest k with 10^k >= n (0 for n <= 1).
fn decade_above(n: u64) -> u32 {
    let k = decade_below(n);
    if 10_u64.checked_pow(k) == Some(n.max(1)) {
        k
    } else {
        k + 1
    }
}

impl LogAxis {
    /// Over the decades around `ns`. An axis of no width (a single N, a power of ten) is
    /// widened by a decade on each side, so the point is in the middle.
    pub fn covering(ns: &[usize], left_px: f64, right_px: f64) -> Self {
        let low = ns.iter().copied().min().unwrap_or(100).max(1) as u64;
        let high = ns.iter().copied().max().unwrap_or(1000).max(1) as u64;
        let (mut low_decade, mut high_decade) = (decade_below(low), decade_above(high));
        if high_decade <= low_decade {
            low_decade = low_decade.saturating_sub(1);
            high_decade = low_decade + 2;
        }
        Self {
            low_decade,
            high_decade,
            left_px,
            right_px,
        }
    }

    /// Where `n` is, px.
    pub fn x(&self, n: usize) -> f64 {
        let span = f64::from(self.high_decade - self.low_decade);
        let t = ((n.max(1) as f64).log10() - f64::from(self.low_decade)) / span;
        self.left_px + t * (self.right_px - self.left_px)
    }

    /// 10^k for each decade of the axis.
    fn decades(&self) -> Vec<usize> {
        (self.low_decade..=self.high_decade)
            .filter_map(|k| 10_usize.checked_pow(k))
            .collect()
    }
}

/// A linear axis from zero to a round value above every figure and line of its plot: a ratio or
/// a size read from zero shows how it grows, a cut axis would magnify noise.
#[derive(Clone, Copy, Debug, PartialEq)]
struct LinearAxis {
    step: f64,
    steps: u32,
    bottom_px: f64,
    top_px: f64,
}

/// 1, 2, 2.5 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    let k = raw.log10().floor() as i32;
    // Divided by an exact power of ten for small steps: 2.5 / 10 is 0.25, 2.5 * 0.1 may not be.
    let times = |m: f64| {
        if k >= 0 {
            m * 10_f64.powi(k)
        } else {
            m / 10_f64.powi(-k)
        }
    };
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(times)
        .find(|step| *step >= raw * (1.0 - 1e-9))
        .unwrap_or_else(|| times(10.0))
}

impl LinearAxis {
    fn covering(max: f64, bottom_px: f64, top_px: f64) -> Self {
        // A little room above the highest point, so it is not on the frame.
        let max = if max.is_finite() && max > 0.0 {
            max * 1.08
        } else {
            1.0
        };
        // Five to seven ticks.
        let step = nice_step(max / 6.0);
        let steps = ((max / step).ceil() as u32).max(1);
        Self {
            step,
            steps,
            bottom_px,
            top_px,
        }
    }

    fn top(&self) -> f64 {
        self.step * f64::from(self.steps)
    }

    fn y(&self, value: f64) -> f64 {
        self.bottom_px - value / self.top() * (self.bottom_px - self.top_px)
    }

    /// The tick values, each computed from its index (no sum of steps drifting).
    fn ticks(&self) -> Vec<f64> {
        (0..=self.steps).map(|i| self.step * f64::from(i)).collect()
    }

    /// Decimals that show the step exactly (2.5 needs one, 0.25 two).
    fn decimals(&self) -> usize {
        (0..6)
            .find(|d| {
                let scaled = self.step * 10_f64.powi(*d as i32);
                (scaled - scaled.round()).abs() < 1e-6
            })
            .unwrap_or(6)
    }
}

/// A point's shape: the series stay apart without their colours (print, colour blindness).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Marker {
    Circle,
    Square,
    Triangle,
    Diamond,
}

impl Marker {
    fn svg(self, x: f64, y: f64, color: &str) -> String {
        let paint = format!("fill=\"{color}\" stroke=\"#ffffff\" stroke-width=\"1\"");
        match self {
            Marker::Circle => format!(
                "<circle cx=\"{}\" cy=\"{}\" r=\"4.5\" {paint}/>",
                px(x),
                px(y)
            ),
            Marker::Square => format!(
                "<rect x=\"{}\" y=\"{}\" width=\"8\" height=\"8\" {paint}/>",
                px(x - 4.0),
                px(y - 4.0)
            ),
            Marker::Triangle => polygon(
                &[(x, y - 5.5), (x + 5.0, y + 4.0), (x - 5.0, y + 4.0)],
                &paint,
            ),
            Marker::Diamond => polygon(
                &[(x, y - 5.5), (x + 5.0, y), (x, y + 5.5), (x - 5.0, y)],
                &paint,
            ),
        }
    }
}

fn polygon(points: &[(f64, f64)], paint: &str) -> String {
    format!("<polygon points=\"{}\" {paint}/>", point_list(points))
}

/// One line of a plot: its value at each N of the run, `None` where the run has none (no
/// steady flow, a zero floor, memory not read).
#[derive(Clone, Debug, PartialEq)]
struct Series {
    /// The `id` of its group in the SVG.
    id: &'static str,
    label: String,
    color: &'static str,
    marker: Marker,
    points: Vec<(usize, Option<f64>)>,
}

/// A bound a check compares figures with, drawn dashed across the plot.
#[derive(Clone, Debug, PartialEq)]
struct Threshold {
    value: f64,
    /// Written just right of the plot, at the line's height.
    value_label: String,
    label: String,
    color: &'static str,
    dash: &'static str,
}

#[derive(Clone, Debug, PartialEq)]
struct Panel {
    title: String,
    y_title: &'static str,
    series: Vec<Series>,
    thresholds: Vec<Threshold>,
}

impl Panel {
    fn max(&self) -> f64 {
        let values = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().filter_map(|p| p.1));
        values
            .chain(self.thresholds.iter().map(|t| t.value))
            .fold(0.0, f64::max)
    }

    fn legend_rows(&self) -> usize {
        self.series.len() + self.thresholds.len()
    }
}

fn finite(value: f64) -> Option<f64> {
    value.is_finite().then_some(value)
}

/// What the event-to-CR check compares, as one number: the p99 over its bound (the API
/// server's write p99 in the same run + the slack), so 1.0 is the limit. A plain ratio of the
/// two p99s would have no limit to draw: the check adds, it does not multiply.
fn p99_over_bound(size: &SizeResult) -> Option<f64> {
    let steady = size.steady.as_ref().filter(|s| s.event_to_cr.count > 0)?;
    finite(steady.event_to_cr.p99_ms / (steady.api_write.p99_ms + P99_SLACK_MS))
}

fn series(
    sizes: &[SizeResult],
    id: &'static str,
    label: &str,
    (color, marker): (&'static str, Marker),
    value: impl Fn(&SizeResult) -> Option<f64>,
) -> Series {
    Series {
        id,
        label: label.to_string(),
        color,
        marker,
        points: sizes.iter().map(|s| (s.n, value(s))).collect(),
    }
}

// Okabe-Ito colours: told apart with the common colour blindnesses, dark enough on white.
const BLUE: &str = "#0072B2";
const VERMILION: &str = "#D55E00";
const GREEN: &str = "#009E73";
const ORANGE: &str = "#E69F00";
const PURPLE: &str = "#CC79A7";
const GREY: &str = "#555555";

fn ratio_panel(sizes: &[SizeResult]) -> Panel {
    let p99 = series(
        sizes,
        "p99",
        &format!("steady flow: event-to-CR p99 / (API write p99 + {P99_SLACK_MS:.0} ms)"),
        (GREEN, Marker::Triangle),
        p99_over_bound,
    );
    let mut thresholds = vec![Threshold {
        value: MAX_RATIO,
        value_label: MAX_RATIO.to_string(),
        label: format!("{MAX_RATIO}: limit of both time ratios"),
        color: GREY,
        dash: "7 4",
    }];
    if p99.points.iter().any(|p| p.1.is_some()) {
        thresholds.push(Threshold {
            value: 1.0,
            value_label: "1.0".to_string(),
            label: "1.0: limit of the event-to-CR p99".to_string(),
            color: GREEN,
            dash: "3 3",
        });
    }
    Panel {
        title: "Each checked figure over its floor or bound (lower is better)".to_string(),
        y_title: "ratio",
        series: vec![
            series(
                sizes,
                "startup",
                "startup sync time / floor (medians)",
                (BLUE, Marker::Circle),
                |s| finite(s.startup.ratio()),
            ),
            series(
                sizes,
                "cr-to-server",
                "CR-to-server time / floor (medians)",
                (VERMILION, Marker::Square),
                |s| finite(s.cr_to_server.ratio()),
            ),
            p99,
        ],
        thresholds,
    }
}

/// MiB of a reading, `None` when it was not read (a live process is never at 0).
fn mib(kib: u64) -> Option<f64> {
    (kib > 0).then(|| kib as f64 / 1024.0)
}

fn memory_panel(run: &Run, sizes: &[SizeResult]) -> Panel {
    // Only where the run checked it (the large profile, from 5,000 caches), one line per
    // target.
    let mut targets: Vec<(u64, usize)> = Vec::new();
    for check in run.checks.iter().filter(|c| c.what == RSS_CHECK) {
        if let Some(kib) = check.n.and_then(rss_target_kib)
            && !targets.iter().any(|(t, _)| *t == kib)
        {
            targets.push((kib, check.n.unwrap_or_default()));
        }
    }
    let thresholds = targets
        .into_iter()
        .zip([("7 4", GREY), ("3 3", PURPLE)].into_iter().cycle())
        .map(|((kib, n), (dash, color))| Threshold {
            value: kib as f64 / 1024.0,
            value_label: format!("{} MiB", kib / 1024),
            label: format!(
                "{} MiB: target of the RSS at N, at N = {} (large profile)",
                kib / 1024,
                thousands(n)
            ),
            color,
            dash,
        })
        .collect();
    Panel {
        title: "Operator resident memory (RSS)".to_string(),
        y_title: "MiB",
        series: vec![
            series(
                sizes,
                "rss-idle",
                "idle, no object",
                (ORANGE, Marker::Circle),
                |s| mib(s.memory.idle_kib),
            ),
            series(
                sizes,
                "rss-n",
                "at N, settled",
                (BLUE, Marker::Square),
                |s| mib(s.memory.at_n_kib),
            ),
            series(
                sizes,
                "rss-2n",
                "at 2N, settled",
                (PURPLE, Marker::Triangle),
                |s| mib(s.memory.at_2n_kib),
            ),
            series(
                sizes,
                "rss-peak",
                "peak (VmHWM)",
                (VERMILION, Marker::Diamond),
                |s| mib(s.memory.peak_kib),
            ),
        ],
        thresholds,
    }
}

/// A coordinate, rounded to 0.1 px: enough on any screen, and the same text on every machine.
fn px(value: f64) -> String {
    // `+ 0.0` turns -0.0 into 0.0; a non-finite value never gets here (`finite`), and would
    // be drawn at 0 rather than break the file.
    let value = if value.is_finite() { value + 0.0 } else { 0.0 };
    format!("{value:.1}")
}

fn point_list(points: &[(f64, f64)]) -> String {
    points
        .iter()
        .map(|(x, y)| format!("{},{}", px(*x), px(*y)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Text for an SVG text node or attribute.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `text` at (x, y); `anchor` is `start`, `middle` or `end`; `extra` more attributes.
fn text(out: &mut String, (x, y): (f64, f64), anchor: &str, extra: &str, content: &str) {
    let _ = writeln!(
        out,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"{anchor}\" fill=\"{TEXT}\"{extra}>{}</text>",
        px(x),
        px(y),
        escape(content)
    );
}

fn line(out: &mut String, (x1, y1): (f64, f64), (x2, y2): (f64, f64), style: &str) {
    let _ = writeln!(
        out,
        "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" {style}/>",
        px(x1),
        px(y1),
        px(x2),
        px(y2)
    );
}

/// `1000` as `1,000`, as the doc writes N.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The N that get a label: the decades, then each N of the run unless it would overlap one.
fn n_labels(axis: &LogAxis, ns: &[usize]) -> Vec<usize> {
    let mut kept: Vec<usize> = Vec::new();
    for n in axis.decades().into_iter().chain(ns.iter().copied()) {
        if kept
            .iter()
            .all(|k| (axis.x(*k) - axis.x(n)).abs() >= LABEL_GAP)
        {
            kept.push(n);
        }
    }
    kept
}

/// The frame, the grid, the ticks and their labels of a plot whose top is `top`.
fn axes(out: &mut String, top: f64, x: &LogAxis, y: &LinearAxis, panel: &Panel, ns: &[usize]) {
    let (left, right, bottom) = (LEFT, WIDTH - RIGHT, top + PLOT_HEIGHT);
    let grid = format!("stroke=\"{GRID}\" stroke-width=\"1\"");
    for value in y.ticks() {
        let at = y.y(value);
        line(out, (left, at), (right, at), &grid);
        let label = format!("{value:.*}", y.decimals());
        text(out, (left - 6.0, at + 4.0), "end", "", &label);
    }
    for decade in x.decades() {
        line(out, (x.x(decade), top), (x.x(decade), bottom), &grid);
    }
    let tick = format!("stroke=\"{FRAME}\" stroke-width=\"1\"");
    for n in ns {
        line(out, (x.x(*n), bottom), (x.x(*n), bottom + 5.0), &tick);
    }
    for n in n_labels(x, ns) {
        text(out, (x.x(n), bottom + 17.0), "middle", "", &thousands(n));
    }
    let _ = writeln!(
        out,
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"{FRAME}\" stroke-width=\"1\"/>",
        px(left),
        px(top),
        px(right - left),
        px(PLOT_HEIGHT)
    );
    let middle = (left + right) / 2.0;
    text(
        out,
        (middle, bottom + 33.0),
        "middle",
        "",
        "N, caches (log scale)",
    );
    let y_middle = top + PLOT_HEIGHT / 2.0;
    let rotate = format!(" transform=\"rotate(-90 {} {})\"", px(20.0), px(y_middle));
    text(out, (20.0, y_middle), "middle", &rotate, panel.y_title);
}

/// The dashed lines, each with its value just right of the plot (moved down when two would
/// overlap).
fn thresholds(out: &mut String, y: &LinearAxis, panel: &Panel) {
    let (left, right) = (LEFT, WIDTH - RIGHT);
    let mut by_height: Vec<&Threshold> = panel.thresholds.iter().collect();
    by_height.sort_by(|a, b| b.value.total_cmp(&a.value));
    let mut last_label = f64::NEG_INFINITY;
    for t in by_height {
        let at = y.y(t.value);
        let style = format!(
            "class=\"threshold\" stroke=\"{}\" stroke-width=\"1.5\" stroke-dasharray=\"{}\"",
            t.color, t.dash
        );
        line(out, (left, at), (right, at), &style);
        let label_y = (at + 4.0).max(last_label + 12.0);
        last_label = label_y;
        let color = format!(" fill=\"{}\"", t.color);
        // `fill` given twice would be invalid: this text has its own colour.
        let _ = writeln!(
            out,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"start\"{color}>{}</text>",
            px(right + 6.0),
            px(label_y),
            escape(&t.value_label)
        );
    }
}

/// Each series: a line through its consecutive points (broken where a point is missing) and
/// a marker on each, in a group whose `id` names the series.
fn plot_series(out: &mut String, x: &LogAxis, y: &LinearAxis, series: &Series) {
    let _ = writeln!(out, "<g id=\"{}\">", series.id);
    let mut runs: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
    for (n, value) in &series.points {
        match (value, runs.last_mut()) {
            (Some(v), Some(run)) => run.push((x.x(*n), y.y(*v))),
            _ => runs.push(Vec::new()),
        }
    }
    for run in runs.iter().filter(|r| r.len() > 1) {
        let _ = writeln!(
            out,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>",
            point_list(run),
            series.color
        );
    }
    for (px_x, px_y) in runs.iter().flatten() {
        let _ = writeln!(out, "{}", series.marker.svg(*px_x, *px_y, series.color));
    }
    let _ = writeln!(out, "</g>");
}

/// One row per series and per dashed line, below the plot's axis title.
fn legend(out: &mut String, top: f64, panel: &Panel) {
    let mut row_y = top;
    for s in &panel.series {
        let (x0, x1) = (LEFT, LEFT + 26.0);
        let style = format!("stroke=\"{}\" stroke-width=\"2\"", s.color);
        line(out, (x0, row_y - 4.0), (x1, row_y - 4.0), &style);
        let _ = writeln!(
            out,
            "{}",
            s.marker.svg((x0 + x1) / 2.0, row_y - 4.0, s.color)
        );
        let label = if s.points.iter().any(|p| p.1.is_some()) {
            s.label.clone()
        } else {
            format!("{} (not measured in this run)", s.label)
        };
        text(out, (x1 + 8.0, row_y), "start", "", &label);
        row_y += ROW;
    }
    for t in &panel.thresholds {
        let style = format!(
            "stroke=\"{}\" stroke-width=\"1.5\" stroke-dasharray=\"{}\"",
            t.color, t.dash
        );
        line(out, (LEFT, row_y - 4.0), (LEFT + 26.0, row_y - 4.0), &style);
        text(out, (LEFT + 34.0, row_y), "start", "", &t.label);
        row_y += ROW;
    }
}

/// Everything below `top` for one panel; returns the height it took.
fn panel(out: &mut String, top: f64, x: &LogAxis, ns: &[usize], panel: &Panel) -> f64 {
    text(
        out,
        (LEFT, top + 13.0),
        "start",
        " font-weight=\"bold\" font-size=\"13\"",
        &panel.title,
    );
    let plot_top = top + 22.0;
    let y = LinearAxis::covering(panel.max(), plot_top + PLOT_HEIGHT, plot_top);
    axes(out, plot_top, x, &y, panel, ns);
    thresholds(out, &y, panel);
    for s in &panel.series {
        plot_series(out, x, &y, s);
    }
    let legend_top = plot_top + PLOT_HEIGHT + 56.0;
    legend(out, legend_top, panel);
    22.0 + PLOT_HEIGHT + 56.0 + panel.legend_rows() as f64 * ROW + 14.0
}

/// The chart of `run`: the ratios panel above the memory panel, N on a log scale.
pub fn render(run: &Run) -> String {
    let mut sizes = run.sizes.clone();
    sizes.sort_by_key(|s| s.n);
    let ns: Vec<usize> = sizes.iter().map(|s| s.n).collect();
    let x = LogAxis::covering(&ns, LEFT + INSET, WIDTH - RIGHT - INSET);
    let panels = [ratio_panel(&sizes), memory_panel(run, &sizes)];

    let mut body = String::new();
    let title = "Resources operator benchmark: cost against N";
    let subtitle = format!(
        "Run of {}, commit {}, profile {}; the figures are in the tables below.",
        run.date, run.commit, run.profile
    );
    text(
        &mut body,
        (LEFT, 26.0),
        "start",
        " font-weight=\"bold\" font-size=\"16\"",
        title,
    );
    text(&mut body, (LEFT, 45.0), "start", "", &subtitle);
    let mut top = 62.0;
    for p in &panels {
        top += panel(&mut body, top, &x, &ns, p);
    }
    let height = top.ceil();
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" \
         font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n\
         <title>{t}. {s}</title>\n\
         <rect x=\"0\" y=\"0\" width=\"{w}\" height=\"{h}\" fill=\"#ffffff\"/>\n{body}</svg>\n",
        w = px(WIDTH),
        h = px(height),
        t = escape(title),
        s = escape(&subtitle),
    )
}

/// The run of a results file (`bench/results.jsonl`, one JSON run per line) that `which` names:
/// `last`, or its line number counted from 1 (blank lines not counted).
pub fn pick_run(jsonl: &str, which: &str) -> anyhow::Result<Run> {
    let lines: Vec<&str> = jsonl.lines().filter(|l| !l.trim().is_empty()).collect();
    let index = if which == "last" {
        lines
            .len()
            .checked_sub(1)
            .context("no run in the results file")?
    } else {
        let number: usize = which
            .parse()
            .with_context(|| format!("--run {which}: `last` or a line number"))?;
        number
            .checked_sub(1)
            .filter(|i| *i < lines.len())
            .with_context(|| format!("--run {which}: the file has {} runs", lines.len()))?
    };
    let line = lines.get(index).context("no such run")?;
    serde_json::from_str(line).with_context(|| format!("run on line {} of the results", index + 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figures::{Memory, Steady, Timed, checks};
    use crate::machine::Machine;
    use crate::stats::Percentiles;

    fn size(n: usize, steady: bool) -> SizeResult {
        let grow = (n as f64).log10();
        SizeResult {
            n,
            startup: Timed::of(vec![grow], vec![grow * 1.1]),
            cr_to_server: Timed::of(vec![grow * 1.05], vec![grow]),
            steady: steady.then(|| Steady {
                event_to_cr: Percentiles {
                    count: 100,
                    p99_ms: 40.0 + grow,
                    ..Percentiles::default()
                },
                api_write: Percentiles {
                    count: 100,
                    p99_ms: 20.0,
                    ..Percentiles::default()
                },
                ..Steady::default()
            }),
            memory: Memory {
                idle_kib: 11_000,
                at_n_kib: 11_000 + 4 * n as u64,
                at_2n_kib: 11_000 + 8 * n as u64,
                peak_kib: 12_000 + 8 * n as u64,
            },
            ..SizeResult::default()
        }
    }

    fn run(ns: &[usize], steady: bool, large: bool) -> Run {
        let sizes: Vec<SizeResult> = ns.iter().map(|n| size(*n, steady)).collect();
        Run {
            date: "2026-12-01T13:03:59Z".into(),
            commit: "abc1234".into(),
            machine: Machine::default(),
            profile: if large { "large" } else { "standard" }.into(),
            command: "make bench".into(),
            checks: checks(&sizes, large),
            sizes,
            passed: true,
        }
    }

    /// The tags of `svg` nest, and the root is one `<svg>`.
    fn check_tags(svg: &str) -> Result<(), String> {
        let mut open: Vec<&str> = Vec::new();
        let mut roots = 0;
        for piece in svg.split('<').skip(1) {
            let tag = piece.split('>').next().unwrap_or_default();
            if !piece.contains('>') {
                return Err(format!("unclosed tag <{piece}"));
            }
            if let Some(name) = tag.strip_prefix('/') {
                match open.pop() {
                    Some(top) if top == name.trim() => {}
                    other => return Err(format!("</{name}> closes {other:?}")),
                }
                continue;
            }
            let name = tag.split_whitespace().next().unwrap_or_default();
            if open.is_empty() {
                roots += 1;
                if name != "svg" {
                    return Err(format!("<{name}> outside <svg>"));
                }
            }
            if !tag.ends_with('/') {
                open.push(name);
            }
        }
        match (open.is_empty(), roots) {
            (true, 1) => Ok(()),
            _ => Err(format!("{roots} roots, {open:?} left open")),
        }
    }

    /// The value of each `name="..."` attribute, in order.
    fn attributes<'a>(svg: &'a str, name: &str) -> Vec<&'a str> {
        let key = format!(" {name}=\"");
        svg.split(key.as_str())
            .skip(1)
            .filter_map(|rest| rest.split('"').next())
            .collect()
    }

    /// The SVG of a series' group.
    fn group<'a>(svg: &'a str, id: &str) -> &'a str {
        let start = format!("<g id=\"{id}\">");
        svg.split(start.as_str())
            .nth(1)
            .and_then(|rest| rest.split("</g>").next())
            .unwrap_or_default()
    }

    /// The points of a series' lines, in drawing order.
    fn series_points(svg: &str, id: &str) -> Vec<(f64, f64)> {
        group(svg, id)
            .split("<polyline points=\"")
            .skip(1)
            .filter_map(|rest| rest.split('"').next())
            .flat_map(|list| list.split(' '))
            .filter_map(|p| p.split_once(','))
            .filter_map(|(x, y)| Some((x.parse().ok()?, y.parse().ok()?)))
            .collect()
    }

    fn assert_well_formed(svg: &str) {
        assert_eq!(check_tags(svg), Ok(()), "{svg}");
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\""));
        for name in ["width", "height", "viewBox"] {
            assert!(!attributes(svg, name).is_empty(), "{name}");
        }
        for name in [
            "x", "y", "x1", "y1", "x2", "y2", "cx", "cy", "width", "height", "points", "viewBox",
        ] {
            for value in attributes(svg, name) {
                for number in value.split([' ', ',']) {
                    let parsed: Result<f64, _> = number.parse();
                    assert!(
                        parsed.is_ok_and(f64::is_finite),
                        "{name}=\"{value}\" in {svg}"
                    );
                }
            }
        }
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }

    #[test]
    fn a_full_run_renders_well_formed_and_the_same_twice() {
        let r = run(&[100, 1000, 5000, 10_000], true, true);
        let svg = render(&r);
        assert_well_formed(&svg);
        assert_eq!(svg, render(&r));
        assert!(svg.contains("<rect x=\"0\" y=\"0\" width=\"760.0\""));
        assert!(svg.contains("fill=\"#ffffff\""));
        assert!(svg.contains("Run of 2026-12-01T13:03:59Z, commit abc1234, profile large"));
        for label in ["100", "1,000", "5,000", "10,000"] {
            assert!(svg.contains(&format!(">{label}</text>")), "{label}");
        }
        // 1.2 and 1.0 for the ratios, 32 and 48 MiB for the memory at 5,000 and 10,000: the
        // large profile checks them.
        assert_eq!(svg.matches("class=\"threshold\"").count(), 4);
        for value in [
            ">1.2</text>",
            ">1.0</text>",
            ">32 MiB</text>",
            ">48 MiB</text>",
        ] {
            assert!(svg.contains(value), "{value}");
        }
    }

    #[test]
    fn points_go_right_with_n_on_the_log_axis() {
        // Sizes in any order are drawn by N.
        let mut r = run(&[100, 1000, 5000, 10_000], true, false);
        r.sizes.reverse();
        let svg = render(&r);
        for id in [
            "startup",
            "cr-to-server",
            "p99",
            "rss-idle",
            "rss-n",
            "rss-2n",
            "rss-peak",
        ] {
            let points = series_points(&svg, id);
            assert_eq!(points.len(), 4, "{id}");
            assert!(
                points.windows(2).all(|w| w[0].0 < w[1].0),
                "{id}: {points:?}"
            );
        }
        // RSS at N grows with N: higher up, a smaller y.
        let rss = series_points(&svg, "rss-n");
        assert!(rss.windows(2).all(|w| w[0].1 > w[1].1), "{rss:?}");
        // Not the large profile: no memory target.
        assert_eq!(svg.matches("class=\"threshold\"").count(), 2);
    }

    #[test]
    fn the_log_axis_maps_decades_exactly() {
        let axis = LogAxis::covering(&[100, 5000], 100.0, 300.0);
        assert_eq!((axis.low_decade, axis.high_decade), (2, 4));
        assert_eq!(px(axis.x(100)), "100.0");
        assert_eq!(px(axis.x(1000)), "200.0");
        assert_eq!(px(axis.x(5000)), "269.9");
        assert_eq!(px(axis.x(10_000)), "300.0");
        // One N, or only one decade: widened so the point is in the middle.
        let single = LogAxis::covering(&[100], 0.0, 200.0);
        assert_eq!((single.low_decade, single.high_decade), (1, 3));
        assert_eq!(px(single.x(100)), "100.0");
        assert_eq!(LogAxis::covering(&[300, 700], 0.0, 1.0).low_decade, 2);
        assert_eq!(LogAxis::covering(&[300, 700], 0.0, 1.0).high_decade, 3);
        assert_eq!((decade_below(0), decade_above(0)), (0, 0));
        assert_eq!((decade_below(999), decade_above(1001)), (2, 4));
    }

    #[test]
    fn a_single_n_and_a_run_without_steady_flow_render() {
        let one = render(&run(&[100], true, false));
        assert_well_formed(&one);
        // A point, no line.
        assert!(series_points(&one, "startup").is_empty());
        assert_eq!(group(&one, "startup").matches("<circle").count(), 1);
        assert!(one.contains(">100</text>"));

        let quiet = render(&run(&[100, 1000], false, false));
        assert_well_formed(&quiet);
        assert!(series_points(&quiet, "p99").is_empty());
        assert!(quiet.contains("(not measured in this run)"));
        // Only the time ratios' limit: there is no p99 to bound.
        assert_eq!(quiet.matches("class=\"threshold\"").count(), 1);
    }

    #[test]
    fn missing_figures_break_the_line_instead_of_breaking_the_file() {
        let mut r = run(&[100, 1000, 5000], true, false);
        // A zero floor (ratio infinite) and a memory reading that was not taken.
        r.sizes[1].startup = Timed::default();
        r.sizes[1].memory.peak_kib = 0;
        r.sizes.push(SizeResult {
            n: 0,
            ..SizeResult::default()
        });
        let svg = render(&r);
        assert_well_formed(&svg);
        // Two points apart, no line between them.
        assert_eq!(series_points(&svg, "startup").len(), 0);
        assert_eq!(group(&svg, "startup").matches("<circle").count(), 2);
        assert_eq!(series_points(&svg, "rss-peak").len(), 0);
        assert_eq!(group(&svg, "rss-peak").matches("<polygon").count(), 2);
        assert_eq!(series_points(&svg, "cr-to-server").len(), 3);
    }

    #[test]
    fn the_p99_is_drawn_over_the_checks_bound() {
        let s = size(1000, true);
        // 43 ms against 20 + 50 ms.
        assert_eq!(
            p99_over_bound(&s).map(|v| (v * 1000.0).round()),
            Some(614.0)
        );
        assert_eq!(p99_over_bound(&size(1000, false)), None);
    }

    #[test]
    fn round_steps_and_escaped_text() {
        assert_eq!(nice_step(0.22), 0.25);
        assert_eq!(nice_step(3.0), 5.0);
        assert_eq!(nice_step(6.0), 10.0);
        let axis = LinearAxis::covering(1.2, 200.0, 0.0);
        assert_eq!((axis.step, axis.steps, axis.decimals()), (0.25, 6, 2));
        assert_eq!(px(axis.y(0.75)), "100.0");
        assert_eq!(escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
        assert_eq!(thousands(10_000), "10,000");
        assert_eq!(thousands(100), "100");
        let mut r = run(&[100], false, false);
        r.commit = "<x>&".into();
        assert_well_formed(&render(&r));
    }

    #[test]
    fn picks_a_run_of_the_results_file() -> anyhow::Result<()> {
        let lines = [run(&[100], true, false), run(&[100, 1000], true, false)]
            .iter()
            .map(serde_json::to_string)
            .collect::<Result<Vec<_>, _>>()?
            .join("\n");
        assert_eq!(pick_run(&lines, "last")?.sizes.len(), 2);
        assert_eq!(pick_run(&lines, "1")?.sizes.len(), 1);
        assert!(pick_run(&lines, "3").is_err());
        assert!(pick_run(&lines, "0").is_err());
        assert!(pick_run(&lines, "first").is_err());
        assert!(pick_run("", "last").is_err());
        Ok(())
    }

    #[test]
    fn every_run_of_the_committed_results_file_reads_back() -> anyhow::Result<()> {
        // Older lines lack later fields (`drift_list`, the runs of a `Timed`): they default.
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/results.jsonl");
        let text = std::fs::read_to_string(path)?;
        let count = text.lines().filter(|l| !l.trim().is_empty()).count();
        for number in 1..=count {
            let r = pick_run(&text, &number.to_string())?;
            assert!(!r.sizes.is_empty(), "line {number}");
            assert_well_formed(&render(&r));
        }
        Ok(())
    }
}
