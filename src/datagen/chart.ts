/**
 * The acceptance bar chart as a PNG, drawn pixel by pixel and encoded by
 * pngjs (pure JavaScript: no browser, no native library). Labels use a 5×7
 * bitmap font (upper case, digits and a few signs).
 */
import { PNG } from "pngjs";

/** 5×7 glyphs: 7 rows of 5 bits, most significant bit on the left. */
const FONT: Record<string, number[]> = {
  A: [14, 17, 17, 31, 17, 17, 17], B: [30, 17, 17, 30, 17, 17, 30], C: [14, 17, 16, 16, 16, 17, 14], D: [30, 17, 17, 17, 17, 17, 30],
  E: [31, 16, 16, 30, 16, 16, 31], F: [31, 16, 16, 30, 16, 16, 16], G: [14, 17, 16, 23, 17, 17, 15], H: [17, 17, 17, 31, 17, 17, 17],
  I: [14, 4, 4, 4, 4, 4, 14], J: [7, 2, 2, 2, 2, 18, 12], K: [17, 18, 20, 24, 20, 18, 17], L: [16, 16, 16, 16, 16, 16, 31],
  M: [17, 27, 21, 21, 17, 17, 17], N: [17, 17, 25, 21, 19, 17, 17], O: [14, 17, 17, 17, 17, 17, 14], P: [30, 17, 17, 30, 16, 16, 16],
  Q: [14, 17, 17, 17, 21, 18, 13], R: [30, 17, 17, 30, 20, 18, 17], S: [15, 16, 16, 14, 1, 1, 30], T: [31, 4, 4, 4, 4, 4, 4],
  U: [17, 17, 17, 17, 17, 17, 14], V: [17, 17, 17, 17, 17, 10, 4], W: [17, 17, 17, 21, 21, 21, 10], X: [17, 17, 10, 4, 10, 17, 17],
  Y: [17, 17, 17, 10, 4, 4, 4], Z: [31, 1, 2, 4, 8, 16, 31],
  "0": [14, 17, 19, 21, 25, 17, 14], "1": [4, 12, 4, 4, 4, 4, 14], "2": [14, 17, 1, 2, 4, 8, 31], "3": [31, 2, 4, 2, 1, 17, 14],
  "4": [2, 6, 10, 18, 31, 2, 2], "5": [31, 16, 30, 1, 1, 17, 14], "6": [6, 8, 16, 30, 17, 17, 14], "7": [31, 1, 2, 4, 8, 8, 8],
  "8": [14, 17, 17, 14, 17, 17, 14], "9": [14, 17, 17, 15, 1, 2, 12],
  " ": [0, 0, 0, 0, 0, 0, 0], "-": [0, 0, 0, 31, 0, 0, 0], _: [0, 0, 0, 0, 0, 0, 31], ".": [0, 0, 0, 0, 0, 12, 12],
  "/": [0, 1, 2, 4, 8, 16, 0], "%": [24, 25, 2, 4, 8, 19, 3], ":": [0, 12, 12, 0, 12, 12, 0], "(": [2, 4, 8, 8, 8, 4, 2],
  ")": [8, 4, 2, 2, 2, 4, 8], "=": [0, 0, 31, 0, 31, 0, 0], "?": [14, 17, 1, 2, 4, 0, 4],
};

type Rgb = [number, number, number];

export interface Bar {
  label: string;
  /** Bar value in [0, 1] (acceptance rate). */
  value: number;
  /** Text shown above the bar. */
  caption: string;
}

export function renderBarChart(title: string, bars: Bar[]): Buffer {
  const barW = 48;
  const gap = 28;
  const plotH = 220;
  const top = 40;
  const labelRows = 3;
  const width = Math.max(360, 60 + bars.length * (barW + gap));
  const height = top + plotH + 20 + labelRows * 10 + 10;
  const png = new PNG({ width, height });
  const px = (x: number, y: number, c: Rgb) => {
    if (x < 0 || y < 0 || x >= width || y >= height) return;
    const i = (y * width + x) * 4;
    png.data[i] = c[0];
    png.data[i + 1] = c[1];
    png.data[i + 2] = c[2];
    png.data[i + 3] = 255;
  };
  const rect = (x: number, y: number, w: number, h: number, c: Rgb) => {
    for (let j = 0; j < h; j++) for (let i = 0; i < w; i++) px(x + i, y + j, c);
  };
  const text = (x: number, y: number, s: string, c: Rgb) => {
    for (const [k, ch] of [...s.toUpperCase()].entries()) {
      const g = FONT[ch] ?? FONT["?"]!;
      g.forEach((row, r) => {
        for (let b = 0; b < 5; b++) if (row & (1 << (4 - b))) px(x + k * 6 + b, y + r, c);
      });
    }
  };
  rect(0, 0, width, height, [255, 255, 255]);
  text(10, 10, title, [20, 20, 20]);
  const baseY = top + plotH;
  rect(40, top, 1, plotH + 1, [120, 120, 120]);
  rect(40, baseY, width - 50, 1, [120, 120, 120]);
  for (const f of [0, 0.5, 1]) {
    const y = baseY - Math.round(f * plotH);
    text(4, y - 3, `${Math.round(f * 100)}%`, [90, 90, 90]);
    for (let x = 41; x < width - 10; x += 4) px(x, y, [210, 210, 210]);
  }
  bars.forEach((b, i) => {
    const x = 60 + i * (barW + gap);
    const h = Math.round(Math.min(1, Math.max(0, b.value)) * plotH);
    rect(x, baseY - h, barW, h, [52, 120, 198]);
    text(x, baseY - h - 10, b.caption.slice(0, Math.floor((barW + gap) / 6)), [20, 20, 20]);
    const per = Math.floor((barW + gap - 4) / 6);
    for (let r = 0; r < labelRows; r++) text(x, baseY + 8 + r * 10, b.label.slice(r * per, (r + 1) * per), [40, 40, 40]);
  });
  return PNG.sync.write(png);
}
