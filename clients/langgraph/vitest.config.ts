import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    globals: true,
    include: ["validate/**/*.spec.ts"],
    testTimeout: 120_000,
    hookTimeout: 300_000,
    fileParallelism: false,
  },
});
