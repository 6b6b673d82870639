/** A small HTTP client for the tests: JSON and multipart, bearer tokens, and the parsed answer. */
export interface Answer<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export interface FormFile {
  data: Buffer;
  filename?: string;
  type?: string;
}

export interface RequestOptions {
  token?: string;
  json?: unknown;
  /** A list of files sends the field once per file, in order (a repeated file field). */
  form?: Record<string, string | FormFile | FormFile[]>;
  headers?: Record<string, string>;
  rawBody?: string | Buffer;
}

export async function call<T = any>(baseUrl: string, method: string, path: string, opts: RequestOptions = {}): Promise<Answer<T>> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  let body: RequestInit['body'];
  if (opts.json !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(opts.json);
  } else if (opts.form) {
    const fd = new FormData();
    for (const [k, v] of Object.entries(opts.form)) {
      if (typeof v === 'string') fd.append(k, v);
      else
        for (const f of Array.isArray(v) ? v : [v])
          fd.append(k, new Blob([new Uint8Array(f.data)], { type: f.type ?? 'image/jpeg' }), f.filename ?? 'upload.jpg');
    }
    body = fd;
  } else if (opts.rawBody !== undefined) {
    body = typeof opts.rawBody === 'string' ? opts.rawBody : new Uint8Array(opts.rawBody);
  }
  const res = await fetch(`${baseUrl}${path}`, { method, headers, body, redirect: 'manual' });
  const text = await res.text();
  let parsed: unknown = text;
  if ((res.headers.get('content-type') ?? '').includes('json')) {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = text;
    }
  }
  return { status: res.status, headers: res.headers, body: parsed as T, text };
}

export const client = (baseUrl: string) => ({
  get: <T = any>(p: string, o?: RequestOptions) => call<T>(baseUrl, 'GET', p, o),
  post: <T = any>(p: string, o?: RequestOptions) => call<T>(baseUrl, 'POST', p, o),
  patch: <T = any>(p: string, o?: RequestOptions) => call<T>(baseUrl, 'PATCH', p, o),
  delete: <T = any>(p: string, o?: RequestOptions) => call<T>(baseUrl, 'DELETE', p, o),
});
