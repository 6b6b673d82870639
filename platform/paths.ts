/** The project's root folder, for the files the processes read from the checkout (migrations, models, the console build). */
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const PROJECT_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
