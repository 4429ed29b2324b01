#!/usr/bin/env python3
"""Writes the seed corpus of openai_http_fuzz (tests/fuzz/corpus/openai_http).

Each file's first byte picks the entry (see openai_http_fuzz.cc): 0x01 = a
raw HTTP request follows, 0x00 = a chat body, 0x02 = a completions body.
Seeds cover every field the parser reads, each wrong type it refuses, and
HTTP framings (chunked, keep-alive, bad lengths). Run from the repository
root: python3 tests/fuzz/make_openai_corpus.py
"""
import json
import os

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'corpus', 'openai_http')

CHAT = [
    {'messages': [{'role': 'user', 'content': 'Hello'}]},
    {'model': 'm', 'messages': [{'role': 'system', 'content': 'Be brief.'},
                                {'role': 'user', 'content': [{'type': 'text', 'text': 'Hi'}]}],
     'temperature': 0, 'top_p': 0.9, 'max_tokens': 8, 'stop': ['\n'], 'seed': 7,
     'logprobs': True, 'top_logprobs': 3, 'stream': True,
     'stream_options': {'include_usage': True}},
    {'messages': [{'role': 'developer', 'content': 'x'}, {'role': 'assistant', 'content': None},
                  {'role': 'tool', 'content': 'y'}],
     'max_completion_tokens': 4, 'top_k': -1, 'min_p': 0.1, 'repetition_penalty': 1.1,
     'presence_penalty': 0.5, 'frequency_penalty': -0.5, 'ignore_eos': True, 'n': 1,
     'user': 'u', 'response_format': {'type': 'text'}},
    {'messages': [{'role': 'user', 'content': 'x'}], 'n': 2},
    {'messages': [{'role': 'user', 'content': 'x'}], 'max_tokens': 'ten'},
    {'messages': [{'role': 'user', 'content': [{'type': 'image_url'}]}]},
    {'messages': [{'role': 'user', 'content': 'x'}], 'tools': [{'type': 'function'}]},
    {'messages': [{'role': 'user', 'content': 'x'}], 'logprobs': True, 'top_logprobs': 21},
    {'messages': []},
]
COMPLETIONS = [
    {'prompt': 'Once upon a time', 'max_tokens': 16, 'logprobs': 2, 'echo': False},
    {'prompt': [1, 2, 3], 'temperature': 0.7},
    {'prompt': [[5, 6, 7]], 'stop': 'x'},
    {'prompt': ['one'], 'suffix': ''},
    {'prompt': ['a', 'b']},
    {'prompt': [99999999, -1]},
]


def http(body, extra=''):
    return (f'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n'
            f'{extra}Content-Length: {len(body)}\r\n\r\n').encode() + body


def main():
    os.makedirs(OUT, exist_ok=True)
    seeds = {}
    for i, doc in enumerate(CHAT):
        seeds[f'chat_{i}'] = b'\x00' + json.dumps(doc).encode()
    for i, doc in enumerate(COMPLETIONS):
        seeds[f'completions_{i}'] = b'\x02' + json.dumps(doc).encode()
    body = json.dumps(CHAT[1]).encode()
    seeds['http_chat'] = b'\x01' + http(body)
    seeds['http_completions'] = b'\x01' + http(json.dumps(COMPLETIONS[0]).encode()).replace(
        b'/v1/chat/completions', b'/v1/completions')
    seeds['http_chunked'] = b'\x01' + (
        b'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n' +
        b'%x\r\n' % len(body) + body + b'\r\n0\r\n\r\n')
    seeds['http_bad_length'] = b'\x01' + http(body).replace(b'Content-Length: ', b'Content-Length: 9')
    seeds['http_get_models'] = b'\x01' + b'GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n'
    seeds['json_deep'] = b'\x00' + b'{"messages": ' + b'[' * 64 + b']' * 64 + b'}'
    seeds['json_bad_utf8'] = b'\x00' + b'{"messages": [{"role": "user", "content": "\xff"}]}'
    for name, data in seeds.items():
        with open(os.path.join(OUT, name), 'wb') as f:
            f.write(data)
    print(f'wrote {len(seeds)} seeds to {OUT}')


if __name__ == '__main__':
    main()
