//! Drawing the charts: the canvas and margins, the y axis (linear or log, nice ticks), the
//! frame, titles and legend, lines with min–max whiskers over categories and bars with
//! whiskers, as plain SVG 1.1 with inline styles.

use std::fmt::Write as _;

use crate::report::Figure;

/// Canvas size and plot margins.
#[derive(Clone, Copy)]
struct Layout {
    w: f64,
    h: f64,
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
}

/// Line charts: legend on the right.
const LINES: Layout = Layout {
    w: 800.0,
    h: 450.0,
    left: 78.0,
    right: 210.0,
    top: 72.0,
    bottom: 58.0,
};

/// Bar charts: no legend, room for slanted labels below.
const BARS: Layout = Layout {
    w: 800.0,
    h: 480.0,
    left: 78.0,
    right: 70.0,
    top: 72.0,
    bottom: 110.0,
};

/// Splits a long subtitle at its " · " separators into lines of at most ~110 characters.
fn wrap(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for part in text.split(" · ") {
        match lines.last_mut() {
            Some(l) if l.len() + part.len() + 3 <= 110 => {
                l.push_str(" · ");
                l.push_str(part);
            }
            _ => lines.push(part.to_string()),
        }
    }
    lines
}

/// A named line: one optional point per x category.
pub struct Series {
    pub name: String,
    pub color: &'static str,
    pub dashed: bool,
    pub points: Vec<Option<Figure>>,
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The colour of a candidate family.
pub fn color(family: &str) -> &'static str {
    let base = family.split(['#', '-']).collect::<Vec<_>>();
    match (base.first().copied(), base.get(1).copied()) {
        (Some("pgpipe"), Some("smol")) => "#1f77b4",
        (Some("pgpipe"), Some("tokio")) => "#2ca02c",
        (Some("pgpipe"), Some("glommio")) => "#9467bd",
        (Some("tokio"), _) => "#ff7f0e",
        (Some("deadpool"), _) => "#d62728",
        _ => "#555555",
    }
}

/// A "nice" step (1, 2 or 5 × 10^k) giving about `n` intervals up to `max`.
fn nice_step(max: f64, n: f64) -> f64 {
    let raw = (max / n).max(f64::MIN_POSITIVE);
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let m = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    m * mag
}

fn fmt_tick(v: f64) -> String {
    if v >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if v >= 1e4 {
        format!("{}k", trim(v / 1e3))
    } else {
        trim(v)
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

struct YAxis {
    l: Layout,
    log: bool,
    lo: f64,
    hi: f64,
}

impl YAxis {
    fn new(l: Layout, values: impl Iterator<Item = f64>, log: bool) -> YAxis {
        let v: Vec<f64> = values.filter(|x| x.is_finite() && *x > 0.0).collect();
        let max = v.iter().copied().fold(0.0, f64::max);
        if log {
            let min = v.iter().copied().fold(f64::MAX, f64::min);
            let (min, max) = if v.is_empty() {
                (1.0, 10.0)
            } else {
                (min, max)
            };
            YAxis {
                l,
                log,
                lo: 10f64.powf(min.log10().floor()),
                hi: 10f64.powf(max.log10().ceil().max(min.log10().floor() + 1.0)),
            }
        } else {
            let max = if max > 0.0 { max } else { 1.0 };
            let step = nice_step(max, 5.0);
            YAxis {
                l,
                log,
                lo: 0.0,
                hi: (max / step).ceil() * step,
            }
        }
    }

    fn y(&self, v: f64) -> f64 {
        let l = self.l;
        let plot = l.h - l.top - l.bottom;
        let frac = if self.log {
            (v.max(self.lo).log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        };
        l.h - l.bottom - frac.clamp(0.0, 1.0) * plot
    }

    fn ticks(&self) -> Vec<f64> {
        if self.log {
            let mut t = Vec::new();
            let mut d = self.lo;
            while d <= self.hi * 1.0001 {
                for m in [1.0, 2.0, 5.0] {
                    let v = d * m;
                    if v <= self.hi * 1.0001 {
                        t.push(v);
                    }
                }
                d *= 10.0;
            }
            t
        } else {
            let step = nice_step(self.hi, 5.0);
            (0..)
                .map(|i| i as f64 * step)
                .take_while(|v| *v <= self.hi * 1.0001)
                .collect()
        }
    }
}

fn frame(svg: &mut String, title: &str, subtitle: &str, y_title: &str, x_title: &str, ax: &YAxis) {
    let Layout {
        w,
        h,
        left,
        right,
        top,
        bottom,
    } = ax.l;
    let _ = writeln!(
        svg,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="Helvetica, Arial, sans-serif" font-size="12">
<rect width="100%" height="100%" fill="#ffffff"/>
<text x="{left}" y="22" font-size="16" font-weight="bold">{}</text>"##,
        esc(title)
    );
    for (i, line) in wrap(subtitle).iter().enumerate() {
        let _ = writeln!(
            svg,
            r##"<text x="{left}" y="{}" font-size="11" fill="#555555">{}</text>"##,
            40 + 15 * i,
            esc(line)
        );
    }
    for t in ax.ticks() {
        let y = ax.y(t);
        let _ = writeln!(
            svg,
            r##"<line x1="{left}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke="#e5e5e5"/><text x="{:.1}" y="{:.1}" text-anchor="end" fill="#333333">{}</text>"##,
            w - right,
            left - 6.0,
            y + 4.0,
            fmt_tick(t)
        );
    }
    let _ = writeln!(
        svg,
        r##"<line x1="{left}" x2="{left}" y1="{top}" y2="{:.1}" stroke="#333333"/><line x1="{left}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#333333"/>"##,
        h - bottom,
        w - right,
        h - bottom,
        h - bottom
    );
    let _ = writeln!(
        svg,
        r##"<text transform="translate(16 {:.1}) rotate(-90)" text-anchor="middle" fill="#333333">{}</text>"##,
        top + (h - top - bottom) / 2.0,
        esc(y_title)
    );
    let _ = writeln!(
        svg,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#333333">{}</text>"##,
        left + (w - left - right) / 2.0,
        h - 14.0,
        esc(x_title)
    );
}

fn legend(svg: &mut String, l: Layout, items: &[(&str, &str, bool)]) {
    for (i, (name, color, dashed)) in items.iter().enumerate() {
        let y = l.top + 8.0 + i as f64 * 20.0;
        let x = l.w - l.right + 14.0;
        let dash = if *dashed {
            r#" stroke-dasharray="5 4""#
        } else {
            ""
        };
        let _ = writeln!(
            svg,
            r##"<line x1="{x:.1}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke="{color}" stroke-width="2.5"{dash}/><text x="{:.1}" y="{:.1}" font-size="11" fill="#222222">{}</text>"##,
            x + 22.0,
            x + 28.0,
            y + 4.0,
            esc(name)
        );
    }
}

/// Lines over categorical x positions, each point a median with a min–max whisker.
pub fn line_chart(
    title: &str,
    subtitle: &str,
    x_title: &str,
    x_labels: &[String],
    y_title: &str,
    series: &[Series],
    log_y: bool,
) -> String {
    let l = LINES;
    let ax = YAxis::new(
        l,
        series
            .iter()
            .flat_map(|s| s.points.iter().flatten())
            .flat_map(|f| [f.max, f.min, f.median]),
        log_y,
    );
    let mut svg = String::new();
    frame(&mut svg, title, subtitle, y_title, x_title, &ax);
    let n = x_labels.len().max(1);
    let plot_w = l.w - l.left - l.right;
    let x = |i: usize| l.left + plot_w * (i as f64 + 0.5) / n as f64;
    for (i, label) in x_labels.iter().enumerate() {
        let _ = writeln!(
            svg,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#333333">{}</text>"##,
            x(i),
            l.h - l.bottom + 18.0,
            esc(label)
        );
    }
    for s in series {
        let mut path = String::new();
        for (i, p) in s.points.iter().enumerate() {
            if let Some(f) = p {
                let cmd = if path.is_empty() { 'M' } else { 'L' };
                let _ = write!(path, "{cmd}{:.1},{:.1} ", x(i), ax.y(f.median));
            }
        }
        let dash = if s.dashed {
            r#" stroke-dasharray="5 4""#
        } else {
            ""
        };
        if !path.is_empty() {
            let _ = writeln!(
                svg,
                r##"<path d="{}" fill="none" stroke="{}" stroke-width="2.5"{dash}/>"##,
                path.trim_end(),
                s.color
            );
        }
        for (i, p) in s.points.iter().enumerate() {
            if let Some(f) = p {
                let (cx, cy) = (x(i), ax.y(f.median));
                if f.max > f.min {
                    let _ = writeln!(
                        svg,
                        r##"<line x1="{cx:.1}" x2="{cx:.1}" y1="{:.1}" y2="{:.1}" stroke="{}" stroke-width="1.5"/><line x1="{:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="{}"/><line x1="{:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="{}"/>"##,
                        ax.y(f.min),
                        ax.y(f.max),
                        s.color,
                        cx - 4.0,
                        cx + 4.0,
                        ax.y(f.min),
                        ax.y(f.min),
                        s.color,
                        cx - 4.0,
                        cx + 4.0,
                        ax.y(f.max),
                        ax.y(f.max),
                        s.color
                    );
                }
                let _ = writeln!(
                    svg,
                    r##"<circle cx="{cx:.1}" cy="{cy:.1}" r="3.5" fill="{}"/>"##,
                    s.color
                );
            }
        }
    }
    let items: Vec<(&str, &str, bool)> = series
        .iter()
        .map(|s| (s.name.as_str(), s.color, s.dashed))
        .collect();
    legend(&mut svg, l, &items);
    svg.push_str("</svg>\n");
    svg
}

/// Vertical bars (median) with min–max whiskers and the value printed above each bar.
pub fn bar_chart(
    title: &str,
    subtitle: &str,
    y_title: &str,
    bars: &[(String, &'static str, Figure)],
) -> String {
    let l = BARS;
    let ax = YAxis::new(l, bars.iter().flat_map(|b| [b.2.max, b.2.median]), false);
    let mut svg = String::new();
    frame(&mut svg, title, subtitle, y_title, "", &ax);
    let n = bars.len().max(1);
    let plot_w = l.w - l.left - l.right;
    let slot = plot_w / n as f64;
    for (i, (label, color, f)) in bars.iter().enumerate() {
        let x0 = l.left + slot * i as f64 + slot * 0.15;
        let bw = slot * 0.7;
        let y = ax.y(f.median);
        let _ = writeln!(
            svg,
            r##"<rect x="{x0:.1}" y="{y:.1}" width="{bw:.1}" height="{:.1}" fill="{color}" fill-opacity="0.85"/>"##,
            (l.h - l.bottom - y).max(0.0)
        );
        let cx = x0 + bw / 2.0;
        if f.max > f.min {
            let _ = writeln!(
                svg,
                r##"<line x1="{cx:.1}" x2="{cx:.1}" y1="{:.1}" y2="{:.1}" stroke="#222222"/>"##,
                ax.y(f.min),
                ax.y(f.max)
            );
        }
        let _ = writeln!(
            svg,
            r##"<text x="{cx:.1}" y="{:.1}" text-anchor="middle" font-size="10" fill="#222222">{}</text>"##,
            ax.y(f.max) - 4.0,
            trim((f.median * 10.0).round() / 10.0)
        );
        let _ = writeln!(
            svg,
            r##"<text transform="translate({:.1} {:.1}) rotate(35)" font-size="10" fill="#333333">{}</text>"##,
            cx - 4.0,
            l.h - l.bottom + 12.0,
            esc(label)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_nice() {
        assert_eq!(nice_step(37_000.0, 5.0), 10_000.0);
        assert_eq!(nice_step(9.0, 5.0), 2.0);
        assert_eq!(fmt_tick(20_000.0), "20k");
        assert_eq!(fmt_tick(0.5), "0.5");
    }

    #[test]
    fn chart_is_well_formed() {
        let f = |v: f64| {
            Some(Figure {
                median: v,
                min: v * 0.9,
                max: v * 1.1,
            })
        };
        let svg = line_chart(
            "t <&>",
            "s",
            "x",
            &["1".into(), "2".into()],
            "y",
            &[Series {
                name: "a".into(),
                color: "#000",
                dashed: false,
                points: vec![f(1.0), None],
            }],
            true,
        );
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("t &lt;&amp;&gt;"));
        assert_eq!(svg.matches("<path").count(), 1);
    }
}
