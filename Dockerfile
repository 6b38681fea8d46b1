# One image for web, worker, beat and migrate (compose.yaml picks the command).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    DJANGO_SETTINGS_MODULE=hitl.settings \
    PYTHONPATH=/app

WORKDIR /app
RUN useradd --create-home --uid 1000 hitl \
    && mkdir -p /data/media /data/var \
    && chown -R hitl:hitl /data

# Dependencies first so code changes do not reinstall them.
COPY pyproject.toml README.md ./
RUN mkdir hitl agents && touch hitl/__init__.py agents/__init__.py \
    && pip install . && pip uninstall -y hitl && rm -rf hitl agents build *.egg-info

COPY manage.py ./
COPY hitl hitl
COPY agents agents
COPY templates templates
COPY static static

USER hitl
EXPOSE 8000
CMD ["python", "-m", "hitl.web", "-b", "0.0.0.0", "-p", "8000", "hitl.asgi:application"]
