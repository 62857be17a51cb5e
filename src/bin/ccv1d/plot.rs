//! `ccv1d bench --plot FILE.png`: achieved bandwidth against bytes moved per call, one series
//! per (op, dtype, layout), the copy reference as a dashed line. Drawn on the raster of
//! `raster.rs` and written by the encoder of `png.rs`: no plotting or image crate.

use crate::png;
use crate::raster::{text_width, Canvas, Marker, Rgb, BLACK, LINE, WHITE};

pub const WIDTH: usize = 1200;
pub const HEIGHT: usize = 800;

/// Distinct, print-safe colours (the "tab10" palette less its grey).
pub const PALETTE: [Rgb; 9] = [
    [31, 119, 180],
    [255, 127, 14],
    [44, 160, 44],
    [214, 39, 40],
    [148, 103, 189],
    [140, 86, 75],
    [227, 119, 194],
    [188, 189, 34],
    [23, 190, 207],
];
const GRID: Rgb = [226, 226, 226];
const COPY: Rgb = [90, 90, 90];
const NOTE: Rgb = [180, 30, 30];
const MARKER_R: i64 = 6;
/// Text scale of labels, ticks and the first title lines.
const BIG: usize = 2;

pub struct Series {
    pub label: String,
    pub color: Rgb,
    pub marker: Marker,
    /// (bytes moved per call, GB/s).
    pub points: Vec<(f64, f64)>,
}

pub struct Chart {
    /// Drawn at scale 2 when they fit, else at scale 1 (cut with "..." if still too long).
    pub title: Vec<String>,
    pub copy_gbs: f64,
    pub series: Vec<Series>,
    /// Rows not drawn (failed); said under the chart when non-zero.
    pub skipped: usize,
}

/// Where the data goes: the plot rectangle and the axis ranges (x in log2 bytes).
pub struct Frame {
    pub left: f64,
    pub right: f64,
    pub top: f64,
    pub bottom: f64,
    pub log2_lo: f64,
    pub log2_hi: f64,
    pub y_max: f64,
}

impl Frame {
    pub fn x(&self, bytes: f64) -> f64 {
        self.left + (bytes.log2() - self.log2_lo) / (self.log2_hi - self.log2_lo) * (self.right - self.left)
    }
    pub fn y(&self, gbs: f64) -> f64 {
        self.bottom - gbs / self.y_max * (self.bottom - self.top)
    }
}

pub fn write(path: &str, chart: &Chart) -> std::io::Result<()> {
    let c = render(chart);
    std::fs::write(path, png::encode(c.width, c.height, &c.pixels))
}

/// "64K", "1M", "256M", "1G", "512": 2^e bytes with a binary suffix.
pub fn bytes_label(e: i32) -> String {
    match e {
        30.. => format!("{}G", 1u64 << (e - 30)),
        20.. => format!("{}M", 1u64 << (e - 20)),
        10.. => format!("{}K", 1u64 << (e - 10)),
        0.. => format!("{}", 1u64 << e),
        _ => format!("2^{e}"),
    }
}

/// A step of 1, 2, 2.5 or 5 × 10^k giving at most about 7 intervals over 0..max.
fn y_step(max: f64) -> f64 {
    let raw = max / 7.0;
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * mag).find(|&s| s >= raw).unwrap_or(10.0 * mag)
}

/// Decimals that show every multiple of `step` exactly (0 for whole numbers).
fn decimals(step: f64) -> usize {
    (0..4).find(|&d| {
        let v = step * 10f64.powi(d as i32);
        (v - v.round()).abs() < 1e-6 * v.max(1.0)
    })
    .unwrap_or(3)
}

pub fn frame(chart: &Chart) -> Frame {
    let legend_w = legend_width(chart);
    let title_h: usize = chart.title.iter().map(|t| title_scale(t) * LINE + 4).sum();
    let xs = || chart.series.iter().flat_map(|s| s.points.iter().map(|p| p.0.log2()));
    let (mut lo, mut hi) = (xs().fold(f64::INFINITY, f64::min), xs().fold(f64::NEG_INFINITY, f64::max));
    if !lo.is_finite() {
        (lo, hi) = (16.0, 30.0);
    }
    // At least two octaves wide, and half a marker-width of padding either side.
    let mid = (lo + hi) / 2.0;
    lo = lo.min(mid - 1.0);
    hi = hi.max(mid + 1.0);
    let pad = 0.04 * (hi - lo);
    let data_max = chart.series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).fold(0.0, f64::max);
    let top_value = if chart.copy_gbs.is_finite() { data_max.max(chart.copy_gbs) } else { data_max };
    Frame {
        left: 100.0,
        right: (WIDTH as i64 - legend_w - 40) as f64,
        top: (16 + title_h + 40) as f64,
        bottom: (HEIGHT - 90) as f64,
        log2_lo: lo - pad,
        log2_hi: hi + pad,
        y_max: if top_value > 0.0 { 1.1 * top_value } else { 1.0 },
    }
}

fn title_scale(t: &str) -> usize {
    if text_width(t, BIG) <= WIDTH as i64 - 40 {
        BIG
    } else {
        1
    }
}

/// Legend box width: marker sample, gap, the longest label (scale 2).
fn legend_width(chart: &Chart) -> i64 {
    let longest = chart.series.iter().map(|s| text_width(&s.label, BIG)).chain([text_width("copy", BIG)]).max().unwrap_or(0);
    56 + longest + 12
}

/// (bytes, mean GB/s of the points of exactly that size), in size order.
fn mean_per_size(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut sorted = points.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<(f64, f64, usize)> = Vec::new();
    for (x, g) in sorted {
        match out.last_mut() {
            Some(last) if last.0 == x => {
                last.1 += g;
                last.2 += 1;
            }
            _ => out.push((x, g, 1)),
        }
    }
    out.into_iter().map(|(x, sum, n)| (x, sum / n as f64)).collect()
}

pub fn render(chart: &Chart) -> Canvas {
    let mut c = Canvas::new(WIDTH, HEIGHT, WHITE);
    let f = frame(chart);
    let (l, r, t, b) = (f.left as i64, f.right as i64, f.top as i64, f.bottom as i64);

    // Title lines.
    let mut y = 16;
    for line in &chart.title {
        let s = title_scale(line);
        let max_chars = (WIDTH - 40) / (6 * s);
        let shown = if line.chars().count() > max_chars { format!("{}...", line.chars().take(max_chars - 3).collect::<String>()) } else { line.clone() };
        c.text(20, y, &shown, s, BLACK);
        y += (s * LINE + 4) as i64;
    }

    // Grid, ticks and labels: y linear from 0, x at powers of two.
    let step = y_step(f.y_max);
    let dec = decimals(step);
    let mut v = 0.0;
    while v <= f.y_max + 1e-9 * step {
        let py = f.y(v).round() as i64;
        c.rect(l, py, r, py, GRID);
        c.rect(l - 6, py, l - 1, py, BLACK);
        let label = format!("{v:.dec$}");
        c.text(l - 12 - text_width(&label, BIG), py - 7, &label, BIG, BLACK);
        v += step;
    }
    let (e_lo, e_hi) = (f.log2_lo.ceil() as i32, f.log2_hi.floor() as i32);
    let e_step = [1, 2, 4, 8, 16].into_iter().find(|s| (e_hi - e_lo) / s <= 10).unwrap_or(32);
    for e in (e_lo..=e_hi).filter(|e| e.rem_euclid(e_step) == 0) {
        let px = f.x(2f64.powi(e)).round() as i64;
        c.rect(px, t, px, b, GRID);
        c.rect(px, b + 1, px, b + 6, BLACK);
        let label = bytes_label(e);
        c.text(px - text_width(&label, BIG) / 2, b + 12, &label, BIG, BLACK);
    }
    c.frame(l - 1, t - 1, r + 1, b + 1, 2, BLACK);
    let x_title = "bytes moved per call (log scale)";
    c.text((l + r) / 2 - text_width(x_title, BIG) / 2, b + 42, x_title, BIG, BLACK);
    c.text(l - 60, t - 30, "GB/s (traffic / median time)", BIG, BLACK);

    // The copy reference, labelled above its right end.
    if chart.copy_gbs.is_finite() && chart.copy_gbs > 0.0 {
        let py = f.y(chart.copy_gbs).round() as i64;
        c.dashed_hline(l, r, py, (14, 8), 2, COPY);
        let label = format!("copy {:.1} GB/s", chart.copy_gbs);
        c.text(r - 8 - text_width(&label, BIG), py - 22, &label, BIG, COPY);
    }

    // Series: a line through the mean GB/s of each size (rows of different shapes can move the
    // same bytes), every row's marker on top.
    for s in &chart.series {
        let trend: Vec<(f64, f64)> = mean_per_size(&s.points).into_iter().map(|(x, g)| (f.x(x), f.y(g))).collect();
        for w in trend.windows(2) {
            c.line(w[0], w[1], 2, s.color);
        }
    }
    for s in &chart.series {
        for &(x, g) in &s.points {
            c.marker(f.x(x), f.y(g), MARKER_R, s.marker, s.color);
        }
    }

    // Legend to the right of the plot.
    let lx = r + 24;
    let mut ly = t + 4;
    for s in &chart.series {
        c.line(((lx) as f64, (ly + 7) as f64), ((lx + 36) as f64, (ly + 7) as f64), 2, s.color);
        c.marker((lx + 18) as f64, (ly + 7) as f64, MARKER_R, s.marker, s.color);
        c.text(lx + 48, ly, &s.label, BIG, BLACK);
        ly += 26;
    }
    c.dashed_hline(lx, lx + 36, ly + 7, (10, 6), 2, COPY);
    c.text(lx + 48, ly, "copy", BIG, BLACK);
    c.text(lx, ly + 34, "markers: one per row", 1, BLACK);
    c.text(lx, ly + 46, "lines: mean per size", 1, BLACK);

    if chart.skipped > 0 {
        let note = format!("{} failed row(s) not shown", chart.skipped);
        c.text(20, HEIGHT as i64 - 24, &note, BIG, NOTE);
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart() -> Chart {
        Chart {
            title: vec!["ccv1d bench --backend cpu --preset seeds".into(), "CPU, 2 backend threads".into()],
            copy_gbs: 20.0,
            series: vec![
                Series { label: "fwd f32 cf".into(), color: PALETTE[0], marker: Marker::Circle, points: vec![(65536.0, 5.0), (16.0 * 1048576.0, 12.0)] },
                Series { label: "bwd bf16 cl".into(), color: PALETTE[3], marker: Marker::Square, points: vec![(1048576.0, 8.0)] },
            ],
            skipped: 1,
        }
    }

    #[test]
    fn labels_and_steps() {
        assert_eq!(bytes_label(16), "64K");
        assert_eq!(bytes_label(20), "1M");
        assert_eq!(bytes_label(28), "256M");
        assert_eq!(bytes_label(30), "1G");
        assert_eq!(bytes_label(9), "512");
        assert_eq!(y_step(22.0), 5.0);
        assert_eq!(y_step(3300.0), 500.0);
        assert_eq!(y_step(1.1), 0.2);
        assert_eq!(decimals(5.0), 0);
        assert_eq!(decimals(0.25), 2);
    }

    #[test]
    fn trend_is_the_mean_per_size() {
        let m = mean_per_size(&[(4.0, 1.0), (2.0, 5.0), (4.0, 3.0), (1.0, 7.0)]);
        assert_eq!(m, [(1.0, 7.0), (2.0, 5.0), (4.0, 2.0)]);
    }

    #[test]
    fn points_land_where_the_axes_say() {
        let ch = chart();
        let f = frame(&ch);
        // Copy 20 GB/s is the top value: the axis ends at 22.
        assert!((f.y_max - 22.0).abs() < 1e-9);
        assert!(f.log2_lo < 16.0 && f.log2_hi > 24.0);
        assert!((f.x(65536.0) - f.left) > 0.0 && f.x(16.0 * 1048576.0) < f.right);
        assert!((f.y(0.0) - f.bottom).abs() < 1e-9);
        let c = render(&ch);
        for s in &ch.series {
            for &(x, g) in &s.points {
                let (px, py) = (f.x(x).round() as usize, f.y(g).round() as usize);
                assert_eq!(c.get(px, py), s.color, "{} at {x} B, {g} GB/s", s.label);
            }
        }
        // The copy line: dashes of COPY along its row, with gaps.
        let py = f.y(20.0).round() as usize;
        let row: Vec<Rgb> = (f.left as usize..f.right as usize / 2).map(|x| c.get(x, py)).collect();
        assert!(row.contains(&COPY) && row.iter().any(|&p| p != COPY), "dashed copy line");
        assert!(c.pixels.contains(&NOTE), "the failed-row note");
        // Nothing drawn outside the canvas was lost off the plot: the frame is black.
        assert_eq!(c.get(f.left as usize - 1, (f.top as usize + f.bottom as usize) / 2), BLACK);
    }

    #[test]
    fn empty_chart_still_renders() {
        let ch = Chart { title: vec!["t".into()], copy_gbs: f64::NAN, series: vec![], skipped: 3 };
        let c = render(&ch);
        assert_eq!((c.width, c.height), (WIDTH, HEIGHT));
    }
}
