#!/usr/bin/env node
// Production entry: compiled commands under dist/, loaded lazily through oclif.manifest.json.
import { execute } from '@oclif/core';

await execute({ dir: import.meta.url });
