#!/usr/bin/env node
/**
 * Draws N five-pointed yellow stars on a dark sky with faint dust, and writes it as a PNG.
 * No dependencies: the PNG is encoded here (RGB, 8 bits, zlib from `node:zlib`, CRC-32 computed
 * here), and the rows use the five PNG filters in turn so every reader path is exercised.
 *
 * Stars never touch (their bounding circles keep a gap of 3 px) and the dust is darker than the
 * "bright" threshold the simulated engine counts with, so the sim's count of connected bright
 * blobs is exactly N — the task's truth is what the image shows, not a hidden label.
 *
 *   node stars.mjs --stars 5 --seed 7 --out image.png [--width 160 --height 120]
 *
 * @module
 */
import { writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { deflateSync } from "node:zlib";

/** Largest star count the default canvas fits with gaps. */
export const MAX_STARS = 12;

const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

function crc32(bytes) {
  let c = 0xffffffff;
  for (const b of bytes) c = CRC_TABLE[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function chunk(type, data) {
  const out = Buffer.alloc(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  out.write(type, 4, "latin1");
  data.copy(out, 8);
  out.writeUInt32BE(crc32(out.subarray(4, 8 + data.length)), 8 + data.length);
  return out;
}

function paeth(a, b, c) {
  const p = a + b - c;
  const pa = Math.abs(p - a);
  const pb = Math.abs(p - b);
  const pc = Math.abs(p - c);
  return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

/**
 * Encodes RGB pixels (`width * height * 3` bytes) as a PNG.
 *
 * @example
 * encodePng(2, 1, Buffer.from([255, 0, 0, 0, 0, 255])); // a red and a blue pixel
 */
export function encodePng(width, height, rgb) {
  const stride = width * 3;
  const raw = Buffer.alloc(height * (stride + 1));
  for (let y = 0; y < height; y++) {
    const filter = y % 5; // None, Sub, Up, Average, Paeth in turn
    raw[y * (stride + 1)] = filter;
    for (let x = 0; x < stride; x++) {
      const cur = rgb[y * stride + x];
      const left = x >= 3 ? rgb[y * stride + x - 3] : 0;
      const up = y > 0 ? rgb[(y - 1) * stride + x] : 0;
      const upLeft = y > 0 && x >= 3 ? rgb[(y - 1) * stride + x - 3] : 0;
      const predictor = [0, left, up, (left + up) >> 1, paeth(left, up, upLeft)][filter];
      raw[y * (stride + 1) + 1 + x] = (cur - predictor) & 0xff;
    }
  }
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // color type RGB
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk("IHDR", ihdr),
    chunk("IDAT", deflateSync(raw)),
    chunk("IEND", Buffer.alloc(0)),
  ]);
}

/** mulberry32: a small seeded PRNG in [0, 1). */
function prng(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function insidePolygon(px, py, pts) {
  let inside = false;
  for (let i = 0, j = pts.length - 1; i < pts.length; j = i++) {
    const [xi, yi] = pts[i];
    const [xj, yj] = pts[j];
    if (yi > py !== yj > py && px < ((xj - xi) * (py - yi)) / (yj - yi) + xi) inside = !inside;
  }
  return inside;
}

/**
 * The star picture: `{png, stars: [{x, y, r}]}`; same options, same bytes.
 *
 * @example
 * const { png } = starImage({ stars: 4, seed: 1 });
 */
export function starImage({ stars, seed = 0, width = 160, height = 120 }) {
  if (!Number.isInteger(stars) || stars < 0 || stars > MAX_STARS)
    throw new RangeError(`stars: must be an integer 0..${MAX_STARS}, got ${stars}`);
  const random = prng(seed * 2654435761 + stars);
  const rgb = Buffer.alloc(width * height * 3);
  for (let i = 0; i < width * height; i++) rgb.set([10, 14, 40], i * 3); // night sky, luma ≈ 15
  // Dust: single dim pixels (luma < 100), which a counter must not take for stars.
  for (let i = 0; i < (width * height) / 60; i++) {
    const at = Math.floor(random() * width * height);
    const v = 50 + Math.floor(random() * 40);
    rgb.set([v, v, v + 10], at * 3);
  }
  const placed = [];
  for (let attempt = 0; placed.length < stars; attempt++) {
    if (attempt > 10_000)
      throw new RangeError(`cannot place ${stars} stars on ${width}x${height} without overlap`);
    const r = 7 + Math.floor(random() * 6);
    const x = r + 1 + random() * (width - 2 * r - 2);
    const y = r + 1 + random() * (height - 2 * r - 2);
    if (placed.some((s) => Math.hypot(s.x - x, s.y - y) < s.r + r + 3)) continue;
    placed.push({ x, y, r });
  }
  for (const { x, y, r } of placed) {
    const turn = random() * Math.PI * 2;
    const pts = Array.from({ length: 10 }, (_, k) => {
      const radius = k % 2 === 0 ? r : r * 0.45;
      const a = turn + (k * Math.PI) / 5;
      return [x + radius * Math.sin(a), y - radius * Math.cos(a)];
    });
    for (let py = Math.floor(y - r); py <= Math.ceil(y + r); py++) {
      for (let px = Math.floor(x - r); px <= Math.ceil(x + r); px++) {
        if (px < 0 || py < 0 || px >= width || py >= height) continue;
        if (insidePolygon(px + 0.5, py + 0.5, pts)) rgb.set([255, 214, 64], (py * width + px) * 3); // luma ≈ 209
      }
    }
  }
  return { png: encodePng(width, height, rgb), stars: placed };
}

function main(argv) {
  const args = {};
  for (let i = 0; i < argv.length; i += 2) {
    const flag = argv[i];
    if (!["--stars", "--seed", "--out", "--width", "--height"].includes(flag) || argv[i + 1] === undefined)
      throw new Error(
        `usage: stars.mjs --stars N [--seed S] --out FILE.png [--width W --height H] (bad: ${flag})`,
      );
    args[flag.slice(2)] = argv[i + 1];
  }
  if (!args.out) throw new Error("--out: required (the PNG file to write)");
  const num = (name, fallback) => {
    if (args[name] === undefined) return fallback;
    const n = Number(args[name]);
    if (!Number.isInteger(n) || n < 0)
      throw new Error(`--${name}: must be a non-negative integer, got '${args[name]}'`);
    return n;
  };
  const { png } = starImage({
    stars: num("stars", undefined),
    seed: num("seed", 0),
    width: num("width", 160),
    height: num("height", 120),
  });
  writeFileSync(args.out, png);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  try {
    main(process.argv.slice(2));
  } catch (err) {
    console.error(err.message);
    process.exit(2);
  }
}
