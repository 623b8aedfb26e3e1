import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { starImage } from "../examples/count_stars/stars.mjs";
import { type ChatTokenizer, loadChatTokenizer } from "../tokenizer/chat-tokenizer";
import { countBrightBlobs, decodePng, ImageFormatError, readImageHeader } from "./image-decode";
import { ImageInputError, ImageStats, imageBytes, imagesFromImageData, inspectImage } from "./images";
import { decideAnswer } from "./policy";
import { type SimEngineHandle, startSimEngine } from "./server";

// biome-ignore lint/suspicious/noExplicitAny: test helper reading arbitrary JSON replies
type Json = any;

/** RGB pixels: dark sky with `squares` bright 6x6 squares placed apart (an independent test picture). */
function squaresRgb(width: number, height: number, squares: number): Buffer {
  const rgb = Buffer.alloc(width * height * 3, 20);
  for (let k = 0; k < squares; k++) {
    const x0 = 4 + (k % 5) * 12;
    const y0 = 4 + Math.floor(k / 5) * 12;
    for (let y = y0; y < y0 + 6; y++)
      for (let x = x0; x < x0 + 6; x++) rgb.set([250, 250, 250], (y * width + x) * 3);
  }
  return rgb;
}

const dataUrl = (png: Buffer, mime = "image/png") => `data:${mime};base64,${png.toString("base64")}`;

describe("image decoding (checked against sharp/libvips as an independent encoder and decoder)", () => {
  it("decodes the generator's PNGs (all five row filters) exactly as libvips does", async () => {
    const { png } = starImage({ stars: 6, seed: 4 });
    const mine = decodePng(png);
    const ref = await sharp(png).raw().toBuffer({ resolveWithObject: true });
    expect([mine.width, mine.height]).toEqual([ref.info.width, ref.info.height]);
    const rgb = Buffer.alloc(mine.width * mine.height * 3);
    for (let i = 0; i < mine.width * mine.height; i++) rgb.set(mine.rgba.subarray(i * 4, i * 4 + 3), i * 3);
    expect(rgb.equals(ref.data)).toBe(true);
  });

  it("reads gray, RGBA and palette PNGs written by libvips and counts their bright blobs", async () => {
    const raw = squaresRgb(64, 40, 7);
    const input = sharp(raw, { raw: { width: 64, height: 40, channels: 3 } });
    const pngs = {
      rgb: await input.clone().png().toBuffer(),
      gray: await input.clone().toColourspace("b-w").png().toBuffer(),
      rgba: await input.clone().ensureAlpha().png().toBuffer(),
      palette: await input.clone().png({ palette: true, colours: 4 }).toBuffer(),
    };
    for (const [kind, png] of Object.entries(pngs)) {
      expect(readImageHeader(png), kind).toEqual({ format: "png", width: 64, height: 40 });
      expect(countBrightBlobs(decodePng(png)), kind).toBe(7);
    }
    expect(pngs.gray[25]).toBe(0); // color type gray
    expect(pngs.rgba[25]).toBe(6); // RGBA
    expect(pngs.palette[25]).toBe(3); // palette
    expect(pngs.palette[24]).toBe(2); // 2 bits per index
  });

  it("reads JPEG frame headers (baseline and progressive); their pixels are not counted", async () => {
    const input = sharp(squaresRgb(64, 40, 3), { raw: { width: 64, height: 40, channels: 3 } });
    for (const progressive of [false, true]) {
      const jpg = await input.clone().jpeg({ progressive }).toBuffer();
      expect(readImageHeader(jpg)).toEqual({ format: "jpeg", width: 64, height: 40 });
      expect(inspectImage(jpg, "f")).toMatchObject({ format: "jpeg", width: 64, height: 40, stars: null });
    }
  });

  it("counts 16-bit and 1-bit PNGs; accepts but does not count interlaced ones; refuses broken ones", async () => {
    const input = sharp(squaresRgb(64, 40, 3), { raw: { width: 64, height: 40, channels: 3 } });
    const deep = await input.clone().toColourspace("rgb16").png().toBuffer();
    expect(deep[24]).toBe(16);
    expect(inspectImage(deep, "f")).toMatchObject({ format: "png", stars: 3 });
    const bilevel = await input.clone().toColourspace("b-w").png({ palette: true, colours: 2 }).toBuffer();
    expect(bilevel[24]).toBe(1);
    expect(inspectImage(bilevel, "f")).toMatchObject({ format: "png", stars: 3 });
    const interlaced = await input.clone().png({ progressive: true }).toBuffer();
    expect(interlaced[28]).toBe(1);
    expect(inspectImage(interlaced, "f")).toMatchObject({ format: "png", stars: null });
    const { png } = starImage({ stars: 2, seed: 1 });
    expect(() => readImageHeader(Buffer.from("GIF89a not ours"))).toThrow(ImageFormatError);
    expect(() => inspectImage(png.subarray(0, 60), "image_data[0]")).toThrow(/^image_data\[0\]: PNG/);
    const corrupt = Buffer.from(png);
    corrupt.fill(0xaa, 45, 70); // inside the zlib stream
    expect(() => inspectImage(corrupt, "x")).toThrow(ImageInputError);
  });

  it("the generator's pictures count exactly (dust stays below the bright threshold)", () => {
    for (let seed = 0; seed < 15; seed++) {
      for (const stars of [0, 1, 4, 9, 12])
        expect(countBrightBlobs(decodePng(starImage({ stars, seed }).png))).toBe(stars);
    }
  });
});

describe("image sources and counters", () => {
  it("takes data URLs and bare base64, refuses remote URLs, paths and bad base64 naming the field", () => {
    const { png } = starImage({ stars: 1, seed: 0 });
    expect(imageBytes(dataUrl(png), "f").equals(png)).toBe(true);
    expect(imageBytes(png.toString("base64"), "f").equals(png)).toBe(true);
    expect(() => imageBytes("https://example.invalid/a.png", "image_data[1]")).toThrow(
      /^image_data\[1\]: remote URLs and file paths are not fetched/,
    );
    expect(() => imageBytes("/tmp/a.png", "f")).toThrow(/file paths/);
    expect(() => imageBytes("data:image/png;base64,@@@", "f")).toThrow(/^f: not valid base64/);
    expect(() => imageBytes(42, "f")).toThrow(/^f: must be a non-empty string/);
  });

  it("counts accepted images and refused requests", () => {
    const stats = new ImageStats();
    const a = starImage({ stars: 3, seed: 1 }).png;
    const b = starImage({ stars: 2, seed: 2 }).png;
    expect(imagesFromImageData([dataUrl(a), b.toString("base64")], stats).map((i) => i.stars)).toEqual([
      3, 2,
    ]);
    expect(() => imagesFromImageData(["data:image/png;base64,AAAA"], stats)).toThrow(/image_data\[0\]/);
    expect(() => imagesFromImageData([[dataUrl(a)]], stats)).toThrow(/batch/);
    expect(stats.snapshot()).toMatchObject({
      received_total: 2,
      refused_total: 1,
      png_total: 2,
      generate_total: 2,
      stars_total: 5,
    });
  });
});

describe("policy: counting stars", () => {
  const prompt =
    "<|im_start|>user\nHow many stars are in this image? Reply with just the number.<|im_end|>\n<|im_start|>assistant\n";
  const image = (stars: number | null, digest = "d") =>
    ({ format: "png", width: 160, height: 120, bytes: 100, digest, stars }) as const;

  it("answers the count (summed over images); greedy is always right; sampled is off by one sometimes", () => {
    const greedy = decideAnswer({
      seed: 0,
      routingKey: "k",
      prompt,
      temperature: 0,
      images: [image(3), image(4)],
    });
    expect(greedy).toMatchObject({ kind: "image_count", expected: "7", correct: true });
    expect(greedy.text).toMatch(/\n\n7$/);
    const answers = Array.from({ length: 200 }, (_, i) =>
      decideAnswer({ seed: 0, routingKey: `s${i}`, prompt, images: [image(5)] }),
    );
    const shown = answers.map((a) => Number(a.text.split("\n").at(-1)));
    expect(new Set(shown)).toEqual(new Set([4, 5, 6]));
    const wrong = answers.filter((a) => !a.correct).length;
    expect(wrong).toBeGreaterThan(20); // 25 % expected
    expect(wrong).toBeLessThan(80);
    expect(answers.every((a, i) => a.correct === (shown[i] === 5))).toBe(true);
  });

  it("cannot count undecoded pixels, and describes images it is not asked to count", () => {
    expect(decideAnswer({ seed: 0, routingKey: "k", prompt, images: [image(null)] })).toMatchObject({
      kind: "image_description",
    });
    const describe = decideAnswer({
      seed: 0,
      routingKey: "k",
      prompt: "<|im_start|>user\nWhat is this?<|im_end|>\n<|im_start|>assistant\n",
      images: [image(2)],
    });
    expect(describe.kind).toBe("image_description");
    expect(describe.text).toContain("png 160x120");
  });
});

describe("the simulated engine's endpoints with images", () => {
  let sim: SimEngineHandle;
  let tok: ChatTokenizer;
  const stats = async () => ((await (await fetch(`${sim.url}/sim/stats`)).json()) as Json).images;
  const post = async (path: string, body: unknown) => {
    const res = await fetch(`${sim.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    return { status: res.status, json: (await res.json()) as Json };
  };
  const question = { type: "text", text: "How many stars are in this image? Reply with just the number." };

  beforeAll(async () => {
    [sim, tok] = await Promise.all([startSimEngine({ port: 0 }), loadChatTokenizer()]);
  }, 30_000);
  afterAll(async () => {
    await sim.close();
  });

  it("chat: an image_url data URL is decoded, counted and answered; the prompt is the text render", async () => {
    const png = starImage({ stars: 4, seed: 9 }).png;
    const messages = [
      { role: "user", content: [question, { type: "image_url", image_url: { url: dataUrl(png) } }] },
    ];
    const before = await stats();
    const { status, json } = await post("/v1/chat/completions", {
      messages,
      temperature: 0,
      return_prompt_token_ids: true,
    });
    expect(status).toBe(200);
    expect(json.choices[0].message.content).toBe("4");
    expect(json.choices[0].prompt_token_ids).toEqual(tok.encode(tok.render(messages)));
    const after = await stats();
    expect(after.chat_total - before.chat_total).toBe(1);
    expect(after.stars_total - before.stars_total).toBe(4);
    expect(after.recent.at(-1)).toMatchObject({
      format: "png",
      width: 160,
      height: 120,
      stars: 4,
      endpoint: "chat",
    });
  });

  it("generate: image_data reaches the policy; bad images are 400 naming the field and counted", async () => {
    const png = starImage({ stars: 2, seed: 3 }).png;
    const ids = tok.encode(tok.render([{ role: "user", content: question.text }]));
    const before = await stats();
    const ok = await post("/generate", {
      input_ids: ids,
      image_data: [dataUrl(png)],
      sampling_params: { temperature: 0, max_new_tokens: 128 },
    });
    expect(ok.status).toBe(200);
    expect(ok.json.text).toMatch(/\n\n2$/);
    const bad = await post("/generate", {
      input_ids: ids,
      image_data: [dataUrl(png), dataUrl(Buffer.from("not an image at all"))],
    });
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toBe("image_data[1]: not a PNG or JPEG image (unknown signature)");
    const chatBad = await post("/v1/chat/completions", {
      messages: [
        { role: "user", content: [question, { type: "image_url", image_url: { url: "http://x/y.png" } }] },
      ],
    });
    expect(chatBad.status).toBe(400);
    expect(chatBad.json.error.message).toMatch(/^messages\[0\]\.content\[1\]\.image_url\.url: remote URLs/);
    const after = await stats();
    expect(after.generate_total - before.generate_total).toBe(1);
    expect(after.refused_total - before.refused_total).toBe(2);
  });
});
