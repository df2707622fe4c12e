"""Secrets: finding them, and keeping them out of drift's database, terminal and reports.

- `shapes`: the catalogue: which names hold a secret, which values look
  like one (token formats, private keys, URL passwords), where one hides in
  a text (after ``--password``, ``API_KEY=``, ``mysql -p``);
- `structure`: the secrets a JSON document's structure names (a flag before a
  value, a "name" beside it, JSON inside a JSON string);
- `redactor`: the `Redactor`, which replaces what the catalogue finds by
  keyed digests in every item a record stores;
- `markers`: how a redacted value reads (``hmac-sha256:<32 hex>`` stored,
  ``[redacted:<8 hex>]`` shown), all the analysis and reports need.
"""
