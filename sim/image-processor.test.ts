import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { starImage } from "../examples/count_stars/stars.mjs";
import { type ChatTokenizer, loadChatTokenizer } from "../tokenizer/chat-tokenizer";
import { expandImagePads, ImageProcessorError, imagePadCount, smartResize } from "./image-processor";
import { type SimEngineHandle, startSimEngine } from "./server";
import { QWEN_VL_IMAGE_PLACEHOLDER, vlTokenizerDir } from "./vl-tokenizer";

// biome-ignore lint/suspicious/noExplicitAny: test helper reading arbitrary JSON replies
type Json = any;

const VS = 151652;
const PAD = 151655;
const VE = 151653;
const ids = { visionStart: VS, imagePad: PAD, visionEnd: VE };
const dataUrl = (png: Buffer) => `data:image/png;base64,${png.toString("base64")}`;

describe("the Qwen-VL test processor (SGLang's smart_resize, 14 px patches merged 2×2)", () => {
  it("sizes images as smart_resize does, rounding halves to even as Python's round()", () => {
    expect(smartResize(120, 160)).toEqual([112, 168]);
    expect(imagePadCount(160, 120)).toBe(24); // 8×12 patches of 14 px, merged 2×2
    // 70 / 28 = 2.5 rounds to 2 in Python (56 px, 2×2 tokens), not to 3 (84 px, 3×3 tokens).
    expect(imagePadCount(70, 70)).toBe(4);
    // Below min_pixels (4·28·28) the image is scaled up: 14×42 → 56×112 → 4×8 patches → 8 tokens.
    expect(smartResize(42, 14)).toEqual([112, 56]);
    expect(imagePadCount(14, 42)).toBe(8);
    expect(imagePadCount(3000, 3000)).toBe(107 * 107);
    // Above max_pixels (16384·28·28) it is scaled down under the budget.
    const [h, w] = smartResize(8000, 8000);
    expect(h * w).toBeLessThanOrEqual(16384 * 28 * 28);
    expect(() => smartResize(1, 201)).toThrow(/aspect ratio must be smaller than 200/);
  });

  it("expands each placeholder's pad to its image's count, in order", () => {
    const images = [
      { width: 160, height: 120 },
      { width: 70, height: 70 },
    ];
    const out = expandImagePads([1, VS, PAD, VE, 2, VS, PAD, VE, 3], images, ids, "image_data");
    expect(out).toEqual([1, VS, ...Array(24).fill(PAD), VE, 2, VS, ...Array(4).fill(PAD), VE, 3]);
  });

  it("refuses a placeholder count that differs from the image count, and already expanded pads", () => {
    const one = [{ width: 160, height: 120 }];
    expect(() => expandImagePads([1, VS, PAD, VE], [...one, ...one], ids, "image_data")).toThrow(
      /2 image\(s\) for 1 image placeholder/,
    );
    expect(() => expandImagePads([1, VS, PAD, VE, VS, PAD, VE], one, ids, "image_data")).toThrow(
      /1 image\(s\) for 2 image placeholder/,
    );
    expect(() => expandImagePads([1, 2], one, ids, "image_data")).toThrow(ImageProcessorError);
    expect(() => expandImagePads([VS, PAD, PAD, VE], one, ids, "image_data")).toThrow(
      /input_ids\[1\]: <\|image_pad\|> outside/,
    );
    // A text-only template renders no placeholder: the prompt runs as sent.
    expect(expandImagePads([1, 2], one, ids, "image_data", { allowNoPlaceholder: true })).toEqual([1, 2]);
  });
});

describe("the simulated engine serving a vision template", () => {
  let sim: SimEngineHandle;
  let tok: ChatTokenizer;
  const post = async (path: string, body: unknown) => {
    const res = await fetch(`${sim.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    return { status: res.status, json: (await res.json()) as Json };
  };
  const png = starImage({ stars: 3, seed: 5 }).png; // 160×120 → 24 pads
  const question = "How many stars are in this image? Reply with just the number.";

  beforeAll(async () => {
    const dir = vlTokenizerDir();
    [sim, tok] = await Promise.all([startSimEngine({ port: 0, tokenizerDir: dir }), loadChatTokenizer(dir)]);
  }, 30_000);
  afterAll(async () => {
    await sim.close();
  });

  it("/generate returns the expanded prompt as prompt_token_ids and counts it in prompt_tokens", async () => {
    const sent = tok.encode(
      tok.render([
        {
          role: "user",
          content: [
            { type: "text", text: question },
            { type: "image_url", image_url: { url: "x" } },
          ],
        },
      ]),
    );
    expect(tok.decode(sent)).toContain(QWEN_VL_IMAGE_PLACEHOLDER);
    const { status, json } = await post("/generate", {
      input_ids: sent,
      image_data: [dataUrl(png)],
      return_prompt_token_ids: true,
      sampling_params: { temperature: 0, max_new_tokens: 64 },
    });
    expect(status).toBe(200);
    const at = sent.indexOf(PAD);
    expect(json.prompt_token_ids).toEqual([
      ...sent.slice(0, at),
      ...Array(24).fill(PAD),
      ...sent.slice(at + 1),
    ]);
    expect(json.meta_info.prompt_tokens).toBe(sent.length + 23);
    expect(json.text).toMatch(/3$/);
  });

  it("refuses an image count that does not match the placeholders, naming image_data", async () => {
    const textOnly = tok.encode(tok.render([{ role: "user", content: question }]));
    const none = await post("/generate", { input_ids: textOnly, image_data: [dataUrl(png)] });
    expect(none.status).toBe(400);
    expect(none.json.error.message).toMatch(/^image_data: 1 image\(s\) for 0 image placeholder/);
  });

  it("chat: the template's placeholder is expanded in prompt_token_ids and usage", async () => {
    const messages = [
      {
        role: "user",
        content: [
          { type: "text", text: question },
          { type: "image_url", image_url: { url: dataUrl(png) } },
        ],
      },
    ];
    const { status, json } = await post("/v1/chat/completions", {
      messages,
      temperature: 0,
      return_prompt_token_ids: true,
    });
    expect(status).toBe(200);
    const rendered = tok.encode(tok.render(messages));
    const prompt = json.choices[0].prompt_token_ids as number[];
    expect(prompt.filter((id) => id === PAD)).toHaveLength(24);
    expect(prompt.filter((id) => id !== PAD)).toEqual(rendered.filter((id) => id !== PAD));
    expect(json.usage.prompt_tokens).toBe(prompt.length);
    expect(json.choices[0].message.content).toBe("3");
  });
});
