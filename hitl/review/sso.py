"""Sign-in through the company's OpenID Connect provider, on mozilla-django-oidc.

The library runs the authorization code flow (state, nonce, PKCE) and checks the ID
token's signature against the provider's JWKS. On top of it: endpoints from the issuer's
discovery document, the ID token's issuer, audience and lifetime checked (the library
checks only signature and nonce), users keyed by (issuer, sub), and groups and named
permissions set from a claim at every login (hitl/core/access/sso.py).
"""

from __future__ import annotations

import logging
import threading
from typing import Any
from urllib.parse import urlencode

import jwt
import requests
from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import SuspiciousOperation
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import import_from_settings
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from hitl.core.access.sso import SUBJECT_MAX, sso_user_sign_in
from hitl.core.errors import Invalid, check_json

log = logging.getLogger(__name__)

# mozilla-django-oidc setting -> discovery document field.
_DISCOVERED = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
}
_discovery: dict[str, Any] = {}
_discovery_lock = threading.Lock()


class SsoUnavailable(Exception):
    """The identity provider could not be reached or answered nonsense."""


class SsoRefused(SuspiciousOperation):
    """An answer from the provider we do not trust or cannot read; the reason is shown."""


def discovery() -> dict[str, Any]:
    """The issuer's discovery document, fetched once per process."""
    issuer = settings.HITL_OIDC_ISSUER
    with _discovery_lock:
        if _discovery.get("_for") != issuer:
            url = f"{issuer}/.well-known/openid-configuration"
            try:
                response = requests.get(url, timeout=settings.OIDC_TIMEOUT)
                response.raise_for_status()
                document = response.json()
            except (requests.RequestException, ValueError) as exc:
                raise SsoUnavailable(f"discovery at {url} failed: {exc}") from exc
            if str(document.get("issuer", "")).rstrip("/") != issuer:
                raise SsoUnavailable(f"{url} names issuer {document.get('issuer')!r}")
            _discovery.clear()
            _discovery.update(document, _for=issuer)
        return dict(_discovery)


def sso_setting(attr: str, *args):
    """A mozilla-django-oidc setting; unset provider endpoints come from discovery."""
    if attr in _DISCOVERED and not getattr(settings, attr, ""):
        value = discovery().get(_DISCOVERED[attr])
        if not value:
            raise SsoUnavailable(f"the discovery document has no {_DISCOVERED[attr]}")
        return value
    return import_from_settings(attr, *args)


class SsoBackend(OIDCAuthenticationBackend):
    """Authenticates the SSO callback only; never a username and password."""

    get_settings = staticmethod(sso_setting)

    def __init__(self, *args, **kwargs):
        # Django builds every backend for each login and each request's user: stay cheap,
        # reach the provider only when a callback is being authenticated.
        from django.contrib.auth import get_user_model

        self.UserModel = get_user_model()

    def get_user(self, user_id):
        # The library's get_user skips ModelBackend's is_active check: a user deactivated
        # in admin would keep their SSO sessions.
        return ModelBackend.get_user(self, user_id)

    def authenticate(self, request, **kwargs):
        if request is None or "nonce" not in kwargs or "password" in kwargs:
            return None
        super().__init__()  # the endpoints, from discovery when not set
        return super().authenticate(request, **kwargs)

    def _verify_jws(self, payload, key):
        """Signature, issuer, audience and lifetime, all at once.

        The library checks only signature and nonce (not iss or aud), and lets PyJWT's
        ExpiredSignatureError escape as a 500: every refusal here is SuspiciousOperation.
        """
        alg = self._header(payload)["alg"]
        try:
            return jwt.decode(
                payload,
                key,
                algorithms=[alg],
                audience=settings.OIDC_RP_CLIENT_ID,
                issuer=settings.HITL_OIDC_ISSUER,
                leeway=settings.HITL_OIDC_LEEWAY,
                options={"require": ["iss", "aud", "exp", "iat", "sub"]},
            )
        except jwt.InvalidTokenError as exc:
            raise SuspiciousOperation(f"ID token refused: {exc}") from exc

    def _header(self, token: Any) -> dict[str, Any]:
        """The ID token's header, if it is signed the way we expect; else SsoRefused.

        Checked before the library looks at it: it reads `kid` unguarded (an unsigned
        `alg: none` token has none, a 500), and PyJWT lets a lone surrogate or a header
        nested 20k deep escape as UnicodeEncodeError or RecursionError.
        """
        if not isinstance(token, str) or not token:
            raise SsoRefused("the token response has no ID token", "it has no ID token")
        try:
            header = jwt.get_unverified_header(token)
        except (jwt.InvalidTokenError, ValueError, RecursionError) as exc:
            raise SsoRefused(f"ID token unreadable: {exc}", "the ID token is unreadable") from None
        alg = header.get("alg")
        if not isinstance(alg, str) or alg.lower() == "none":
            raise SsoRefused(f"ID token not signed (alg {alg!r})", "the ID token is not signed")
        if alg != self.OIDC_RP_SIGN_ALGO:
            raise SsoRefused(
                f"ID token signed with {alg!r}",
                f"the ID token is signed with {alg[:20]}, not {self.OIDC_RP_SIGN_ALGO}",
            )
        kid = header.get("kid")
        if self.get_settings("OIDC_VERIFY_KID", True) and not (
            isinstance(kid, str) and 0 < len(kid) <= 200 and "\x00" not in kid
        ):
            raise SsoRefused(
                f"ID token names no usable key id (kid {kid!r:.50})",
                "the ID token does not name its signing key",
            )
        return header

    def verify_token(self, token, **kwargs):
        self._header(token)
        try:
            payload = super().verify_token(token, **kwargs)
        except (jwt.InvalidTokenError, ValueError, RecursionError) as exc:
            raise SuspiciousOperation(f"ID token refused: {exc}") from exc
        audience = payload["aud"]
        several = isinstance(audience, list) and len(audience) > 1
        if several and payload.get("azp") != settings.OIDC_RP_CLIENT_ID:
            raise SuspiciousOperation(f"ID token authorized for {payload.get('azp')!r}")
        return payload

    def get_userinfo(self, access_token, id_token, payload):
        """The ID token's claims, completed by the userinfo endpoint for the same subject."""
        claims = dict(payload)
        if self.OIDC_OP_USER_ENDPOINT:
            info = super().get_userinfo(access_token, id_token, payload)
            if info.get("sub") != payload["sub"]:
                raise SuspiciousOperation("userinfo names another subject than the ID token")
            claims.update(info)
        try:
            # Every claim may end up in a column (e-mail, names, the group claim's values).
            check_json(claims, "claims")
        except Invalid as exc:
            raise SsoRefused(
                f"claims refused: {exc.message}", "its claims cannot be stored"
            ) from None
        return claims

    def verify_claims(self, claims):
        subject = claims.get("sub")
        return isinstance(subject, str) and 0 < len(subject) <= SUBJECT_MAX

    def get_or_create_user(self, access_token, id_token, payload):
        claims = self.get_userinfo(access_token, id_token, payload)
        return sso_user_sign_in(
            issuer=settings.HITL_OIDC_ISSUER,
            claims=claims,
            groups_claim=settings.HITL_OIDC_GROUPS_CLAIM,
            group_map=settings.HITL_OIDC_GROUP_MAP,
            permission_map=settings.HITL_OIDC_PERMISSION_MAP,
            username_claim=settings.HITL_OIDC_USERNAME_CLAIM,
        )


def _refused(request, message: str, status: int):
    """The sign-in page again, saying why."""
    return render(
        request,
        "registration/login.html",
        {**login_context(), "sso_error": message, "next": ""},
        status=status,
    )


class SsoLoginView(OIDCAuthenticationRequestView):
    """/sso/login/: off to the provider's authorization endpoint."""

    get_settings = staticmethod(sso_setting)

    def __init__(self, *args, **kwargs):
        super(OIDCAuthenticationRequestView, self).__init__(*args, **kwargs)

    def get(self, request):
        if not settings.HITL_SSO:
            raise Http404("single sign-on is not configured")
        try:
            self.OIDC_OP_AUTH_ENDPOINT = sso_setting("OIDC_OP_AUTHORIZATION_ENDPOINT")
        except SsoUnavailable as exc:
            log.error("sso: %s", exc)
            return _refused(request, "The identity provider cannot be reached.", 502)
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        return super().get(request)


class SsoCallbackView(OIDCAuthenticationCallbackView):
    """/sso/callback/: the provider's answer; a refused one changes nothing."""

    get_settings = staticmethod(sso_setting)

    def get(self, request):
        if not settings.HITL_SSO:
            raise Http404("single sign-on is not configured")
        try:
            return super().get(request)
        except SsoRefused as exc:
            log.warning("sso: sign-in refused: %s", exc)
            message = f"Single sign-on refused the identity provider's answer: {exc.args[1]}."
            return _refused(request, message, 400)
        except SuspiciousOperation as exc:
            log.warning("sso: sign-in refused: %s", exc)
            return _refused(request, "Single sign-on refused the identity provider's answer.", 400)
        except requests.HTTPError as exc:
            log.warning("sso: the provider refused: %s", exc)
            return _refused(request, "The identity provider refused the sign-in.", 400)
        except (SsoUnavailable, requests.RequestException) as exc:
            log.error("sso: %s", exc)
            return _refused(request, "The identity provider cannot be reached.", 502)

    def login_failure(self):
        return _refused(self.request, "Single sign-on did not sign you in.", 403)


def login_context() -> dict[str, Any]:
    return {
        "sso": settings.HITL_SSO,
        "sso_label": settings.HITL_OIDC_LABEL,
        "password_login": settings.HITL_PASSWORD_LOGIN,
    }


class LoginView(auth_views.LoginView):
    """The login page: password, SSO or both; with passwords off a password post is refused."""

    redirect_authenticated_user = True

    def get_context_data(self, **kwargs):
        return {**super().get_context_data(**kwargs), **login_context()}

    def post(self, request, *args, **kwargs):
        if not settings.HITL_PASSWORD_LOGIN:
            context = self.get_context_data()
            context["sso_error"] = "Password login is turned off: sign in with single sign-on."
            return render(request, self.template_name, context, status=403)
        return super().post(request, *args, **kwargs)


class LogoutView(auth_views.LogoutView):
    """Ends the HITL session; with HITL_OIDC_LOGOUT_AT_IDP, then the provider's too."""

    def post(self, request, *args, **kwargs):
        id_token = request.session.get("oidc_id_token")
        response = super().post(request, *args, **kwargs)
        if not (settings.HITL_SSO and getattr(settings, "HITL_OIDC_LOGOUT_AT_IDP", False)):
            return response
        try:
            end_session = discovery().get("end_session_endpoint")
        except SsoUnavailable as exc:
            log.error("sso: logout at the provider skipped: %s", exc)
            return response
        if not (id_token and end_session):
            return response
        query = {
            "id_token_hint": id_token,
            "client_id": settings.OIDC_RP_CLIENT_ID,
            "post_logout_redirect_uri": request.build_absolute_uri(reverse("login")),
        }
        return redirect(f"{end_session}?{urlencode(query)}")


def admin_login(request, **kwargs):
    """Admin's login page; with passwords off, the login page (which offers only SSO)."""
    if settings.HITL_PASSWORD_LOGIN:
        return admin.site.login(request, **kwargs)
    return redirect(f"{reverse('login')}?{request.GET.urlencode()}")
